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
 * @param[in] ident     ICMP identifier distinguishing this prober.
 * @param[in] on_reply  Reply callback.
 * @param[in] user_data Passed to @a on_reply.
 */
struct gateway_probe *gateway_probe_new(struct sockaddr const *source,
                                        struct sockaddr const *target,
                                        uint16_t ident,
                                        gateway_probe_reply_cb on_reply,
                                        void *user_data);

/**
 * @brief Send one echo request with sequence number @a seq.
 *
 * @return @c false if it could not be sent (e.g. the source address
 *         is not on the host); the caller counts that as a loss.
 */
bool gateway_probe_send(struct gateway_probe *p, uint16_t seq);

/**
 * @brief Close the socket and free the prober.
 */
void gateway_probe_destroy(struct gateway_probe *p);

#endif  // GWSTEER_GATEWAY_PROBE_H
