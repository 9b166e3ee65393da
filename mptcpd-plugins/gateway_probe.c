// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_probe.c
 *
 * @brief ICMP echo probes sent from one gateway's source address.
 *
 * Why ICMP echo: it needs nothing on the far end (the proxy, or the
 * gateway itself, answers from the kernel), costs 64 bytes per probe,
 * and, sent from the gateway's source address, follows exactly the
 * policy route or SRv6 segment list that the gateway's subflows take.
 * A raw socket bound to the source only receives packets addressed to
 * that source, so each gateway has its own socket and replies never
 * need to be demultiplexed between gateways.
 *
 * A forged answer would keep a dead gateway up or win the preference
 * race, so an answer counts only if it comes from the probe target,
 * carries our random identifier and echoes our random 16-byte token;
 * the kernel filters everything but echo replies before they reach
 * us, and one wake-up reads a bounded number of datagrams.
 */

#include <errno.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ell/ell.h>

#include "gateway_config.h"
#include "gateway_probe.h"

/// Echo payload size: a classic 64-byte ping including the header.
#define PROBE_PAYLOAD_LEN 56

/// Random bytes at the start of the payload that an answer must echo.
#define PROBE_TOKEN_LEN 16

/// ICMP_FILTER of <linux/icmp.h>, which clashes with <netinet/ip_icmp.h>.
#define GWSTEER_ICMP_FILTER 1

/// Datagrams read per wake-up at most (a flood cannot starve mptcpd).
#define PROBE_MAX_READS 32

/**
 * @struct gateway_probe
 *
 * @brief Prober state for one gateway.
 */
struct gateway_probe
{
        /// Address the socket is bound to.
        struct sockaddr_storage source;

        /// Echo target.
        struct sockaddr_storage target;

        /// ICMP identifier.
        uint16_t ident;

        /// Random token echoed in every answer.
        uint8_t token[PROBE_TOKEN_LEN];

        /// Raw socket, watched by @c io; @c NULL until first send.
        struct l_io *io;

        /// Reply callback.
        gateway_probe_reply_cb on_reply;

        /// Passed to @c on_reply.
        void *user_data;

        /// Whether the last socket error was already logged.
        bool error_logged;
};

/**
 * @brief Internet checksum (RFC 1071) of an ICMPv4 message.
 */
static uint16_t inet_checksum(void const *data, size_t len)
{
        uint8_t const *p = data;
        uint32_t sum = 0;

        for (; len > 1; p += 2, len -= 2)
                sum += (uint32_t) (p[0] << 8 | p[1]);

        if (len == 1)
                sum += (uint32_t) (p[0] << 8);

        while (sum >> 16)
                sum = (sum & 0xffff) + (sum >> 16);

        return htons((uint16_t) ~sum);
}

bool gateway_probe_match(struct gateway_probe const *p,
                         uint8_t const *buf, size_t len,
                         struct sockaddr const *from, uint16_t *seq)
{
        uint8_t const *payload;
        size_t left;
        uint16_t ident;

        if (from == NULL || !gwsteer_same_ip(from, (struct sockaddr const *)
                                             &p->target))
                return false;  // Only the target answers for the path.

        if (p->target.ss_family == AF_INET) {
                // IPv4 raw sockets deliver the IP header too.
                if (len < sizeof(struct ip))
                        return false;

                size_t const ihl = (size_t) (buf[0] & 0x0f) * 4;
                if (ihl < sizeof(struct ip)
                    || len < ihl + sizeof(struct icmphdr))
                        return false;

                struct icmphdr icmp;
                memcpy(&icmp, buf + ihl, sizeof(icmp));
                if (icmp.type != ICMP_ECHOREPLY || icmp.code != 0)
                        return false;

                ident = ntohs(icmp.un.echo.id);
                *seq = ntohs(icmp.un.echo.sequence);
                payload = buf + ihl + sizeof(icmp);
                left = len - ihl - sizeof(icmp);
        } else {
                if (len < sizeof(struct icmp6_hdr))
                        return false;

                struct icmp6_hdr icmp6;
                memcpy(&icmp6, buf, sizeof(icmp6));
                if (icmp6.icmp6_type != ICMP6_ECHO_REPLY
                    || icmp6.icmp6_code != 0)
                        return false;

                ident = ntohs(icmp6.icmp6_id);
                *seq = ntohs(icmp6.icmp6_seq);
                payload = buf + sizeof(icmp6);
                left = len - sizeof(icmp6);
        }

        return ident == p->ident && left >= PROBE_TOKEN_LEN
                && memcmp(payload, p->token, PROBE_TOKEN_LEN) == 0;
}

/**
 * @brief l_io read handler: read what is there, up to a bound.
 */
static bool probe_readable(struct l_io *io, void *user_data)
{
        struct gateway_probe *const p = user_data;
        int const fd = l_io_get_fd(io);
        uint8_t buf[512];

        for (int i = 0; i < PROBE_MAX_READS; ++i) {
                struct sockaddr_storage from;
                socklen_t fromlen = sizeof(from);
                uint16_t seq;
                ssize_t const n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
                                           (struct sockaddr *) &from,
                                           &fromlen);

                if (n < 0)
                        break;

                if (gateway_probe_match(p, buf, (size_t) n,
                                        (struct sockaddr *) &from, &seq))
                        p->on_reply(seq, p->user_data);
        }

        return true;
}

/**
 * @brief Open and bind the raw socket.
 *
 * @return @c false (logged once) if the source is not usable yet.
 */
static bool probe_open(struct gateway_probe *p)
{
        int const family = p->source.ss_family;
        int const proto = family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
        int const fd = socket(family,
                              SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
                              proto);
        char buf[INET6_ADDRSTRLEN];

        if (fd < 0) {
                if (!p->error_logged)
                        l_error("probe socket for %s: %s",
                                gwsteer_ntop((struct sockaddr *) &p->source,
                                             buf, sizeof(buf)),
                                strerror(errno));
                p->error_logged = true;
                return false;
        }

        socklen_t const len = family == AF_INET
                ? sizeof(struct sockaddr_in)
                : sizeof(struct sockaddr_in6);

        if (bind(fd, (struct sockaddr *) &p->source, len) != 0) {
                if (!p->error_logged)
                        l_error("probe source %s is not usable: %s",
                                gwsteer_ntop((struct sockaddr *) &p->source,
                                             buf, sizeof(buf)),
                                strerror(errno));
                p->error_logged = true;
                close(fd);
                return false;
        }

        // Only echo replies wake us up.
        if (family == AF_INET6) {
                struct icmp6_filter filter;
                ICMP6_FILTER_SETBLOCKALL(&filter);
                ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &filter);
                (void) setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER,
                                  &filter, sizeof(filter));
        } else {
                // struct icmp_filter: a bit per ICMP type to drop.
                uint32_t const filter = ~(1u << ICMP_ECHOREPLY);
                (void) setsockopt(fd, SOL_RAW, GWSTEER_ICMP_FILTER,
                                  &filter, sizeof(filter));
        }

        p->io = l_io_new(fd);
        l_io_set_close_on_destroy(p->io, true);
        l_io_set_read_handler(p->io, probe_readable, p, NULL);
        p->error_logged = false;

        return true;
}

struct gateway_probe *gateway_probe_new(struct sockaddr const *source,
                                        struct sockaddr const *target,
                                        uint16_t ident,
                                        gateway_probe_reply_cb on_reply,
                                        void *user_data)
{
        struct gateway_probe *const p = l_new(struct gateway_probe, 1);

        memcpy(&p->source, source, source->sa_family == AF_INET
               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
        memcpy(&p->target, target, target->sa_family == AF_INET
               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
        p->ident = ident;
        l_getrandom(p->token, sizeof(p->token));
        p->on_reply = on_reply;
        p->user_data = user_data;

        return p;
}

size_t gateway_probe_build(struct gateway_probe const *p, uint16_t seq,
                           uint8_t *buf, size_t len)
{
        size_t const total = sizeof(struct icmphdr) + PROBE_PAYLOAD_LEN;

        if (len < total)
                return 0;

        memset(buf, 0xa5, total);
        memcpy(buf + sizeof(struct icmphdr), p->token, PROBE_TOKEN_LEN);

        if (p->target.ss_family == AF_INET) {
                struct icmphdr icmp = {
                        .type = ICMP_ECHO,
                        .code = 0,
                };
                icmp.un.echo.id = htons(p->ident);
                icmp.un.echo.sequence = htons(seq);
                memcpy(buf, &icmp, sizeof(icmp));
                icmp.checksum = inet_checksum(buf, total);
                memcpy(buf, &icmp, sizeof(icmp));
        } else {
                // The kernel fills in the ICMPv6 checksum.
                struct icmp6_hdr icmp6 = {
                        .icmp6_type = ICMP6_ECHO_REQUEST,
                        .icmp6_code = 0,
                };
                icmp6.icmp6_id = htons(p->ident);
                icmp6.icmp6_seq = htons(seq);
                memcpy(buf, &icmp6, sizeof(icmp6));
        }

        return total;
}

void gateway_probe_set_source(struct gateway_probe *p,
                              struct sockaddr const *source)
{
        l_io_destroy(p->io);
        p->io = NULL;
        p->error_logged = false;
        memset(&p->source, 0, sizeof(p->source));

        if (source != NULL)
                memcpy(&p->source, source, source->sa_family == AF_INET
                       ? sizeof(struct sockaddr_in)
                       : sizeof(struct sockaddr_in6));
}

int gateway_probe_fd(struct gateway_probe const *p)
{
        return p->io == NULL ? -1 : l_io_get_fd(p->io);
}

bool gateway_probe_send(struct gateway_probe *p, uint16_t seq)
{
        if (p->source.ss_family == AF_UNSPEC)
                return false;  // The gateway's interface has no address.

        if (p->io == NULL && !probe_open(p))
                return false;

        uint8_t msg[sizeof(struct icmphdr) + PROBE_PAYLOAD_LEN];
        size_t const size = gateway_probe_build(p, seq, msg, sizeof(msg));
        socklen_t const len = p->source.ss_family == AF_INET
                ? sizeof(struct sockaddr_in)
                : sizeof(struct sockaddr_in6);

        ssize_t const n = sendto(l_io_get_fd(p->io), msg, size,
                                 MSG_DONTWAIT,
                                 (struct sockaddr *) &p->target, len);

        if (n < 0) {
                /*
                 * EADDRNOTAVAIL and friends mean the source address went
                 * away; reopen on the next attempt.  ENETUNREACH just
                 * means this probe is lost.
                 */
                if (errno == EADDRNOTAVAIL || errno == EINVAL) {
                        l_io_destroy(p->io);
                        p->io = NULL;
                }
                return false;
        }

        return true;
}

void gateway_probe_destroy(struct gateway_probe *p)
{
        if (p == NULL)
                return;

        l_io_destroy(p->io);
        l_free(p);
}
