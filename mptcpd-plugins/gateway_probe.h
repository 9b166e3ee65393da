// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_probe.h
 *
 * @brief ICMP echo probes sent from one gateway's source address.
 */

#ifndef GWSTEER_GATEWAY_PROBE_H
#define GWSTEER_GATEWAY_PROBE_H

#include <stdbool.h>
#include <stdint.h>

struct sockaddr;
struct gateway_probe;

/**
 * @brief Called for every echo reply that matches the probe.
 *
 * @param[in] seq       Sequence number echoed back.
 * @param[in] user_data Pointer given to gateway_probe_new().
 */
typedef void (*gateway_probe_reply_cb)(uint16_t seq, void *user_data);

/**
 * @brief Create an echo prober bound to @a source.
 *
 * The socket is opened lazily by gateway_probe_send(), so a source
 * address that appears later (DHCP, interface up) is picked up.
 *
 * @param[in] source    Local address; policy routing sends packets
 *                      from it through its gateway.
 * @param[in] target    Echo target (same family as @a source).
 * @param[in] ident     ICMP identifier (random: not guessable off path).
 * @param[in] on_reply  Reply callback.
 * @param[in] user_data Passed to @a on_reply.
 */
struct gateway_probe *gateway_probe_new(struct sockaddr const *source,
                                        struct sockaddr const *target,
                                        uint16_t ident,
                                        gateway_probe_reply_cb on_reply,
                                        void *user_data);

/**
 * @brief Send later probes from @a source (a gateway's new address).
 *
 * Closes the socket bound to the old address; the next send binds
 * the new one.  @a source @c NULL: the gateway has no address, sends
 * fail until one is set.
 */
void gateway_probe_set_source(struct gateway_probe *p,
                              struct sockaddr const *source);

/**
 * @brief Send one echo request with sequence number @a seq.
 *
 * @return @c false if it could not be sent (e.g. the source address
 *         is not on the host); the caller counts that as a loss.
 */
bool gateway_probe_send(struct gateway_probe *p, uint16_t seq);

/**
 * @brief The prober's socket, or -1 before the first send (tests).
 */
int gateway_probe_fd(struct gateway_probe const *p);

/**
 * @brief Close the socket and free the prober.
 */
void gateway_probe_destroy(struct gateway_probe *p);

/**
 * @brief Build the echo request with sequence @a seq into @a buf.
 *
 * The payload carries the prober's random token, which an answer must
 * echo back (used by gateway_probe_send() and the unit tests).
 *
 * @return The message length, or 0 if @a len is too small.
 */
size_t gateway_probe_build(struct gateway_probe const *p, uint16_t seq,
                           uint8_t *buf, size_t len);

/**
 * @brief Is @a buf, received from @a from, an answer to one of our probes?
 *
 * An answer must come from the probe target, be an echo reply with our
 * identifier and carry our token; @a buf starts with the IPv4 header
 * for IPv4 (raw sockets deliver it) and with the ICMPv6 header for
 * IPv6.
 *
 * @param[out] seq The sequence number answered.
 */
bool gateway_probe_match(struct gateway_probe const *p,
                         uint8_t const *buf, size_t len,
                         struct sockaddr const *from, uint16_t *seq);

#endif  // GWSTEER_GATEWAY_PROBE_H
