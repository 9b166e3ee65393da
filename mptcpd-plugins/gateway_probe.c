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

/**
 * @brief Parse one received datagram; report it if it is our reply.
 */
static void handle_datagram(struct gateway_probe *p,
                            uint8_t const *buf,
                            size_t len)
{
        uint16_t ident;
        uint16_t seq;

        if (p->source.ss_family == AF_INET) {
                // IPv4 raw sockets deliver the IP header too.
                if (len < sizeof(struct ip))
                        return;

                size_t const ihl = (size_t) (buf[0] & 0x0f) * 4;
                if (len < ihl + sizeof(struct icmphdr))
                        return;

                struct icmphdr icmp;
                memcpy(&icmp, buf + ihl, sizeof(icmp));
                if (icmp.type != ICMP_ECHOREPLY)
                        return;

                ident = ntohs(icmp.un.echo.id);
                seq = ntohs(icmp.un.echo.sequence);
        } else {
                if (len < sizeof(struct icmp6_hdr))
                        return;

                struct icmp6_hdr icmp6;
                memcpy(&icmp6, buf, sizeof(icmp6));
                if (icmp6.icmp6_type != ICMP6_ECHO_REPLY)
                        return;

                ident = ntohs(icmp6.icmp6_id);
                seq = ntohs(icmp6.icmp6_seq);
        }

        if (ident == p->ident)
                p->on_reply(seq, p->user_data);
}

/**
 * @brief l_io read handler: drain the socket.
 */
static bool probe_readable(struct l_io *io, void *user_data)
{
        struct gateway_probe *const p = user_data;
        int const fd = l_io_get_fd(io);
        uint8_t buf[512];

        for (;;) {
                ssize_t const n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n < 0)
                        break;

                handle_datagram(p, buf, (size_t) n);
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

        if (family == AF_INET6) {
                // Only echo replies wake us up.
                struct icmp6_filter filter;
                ICMP6_FILTER_SETBLOCKALL(&filter);
                ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &filter);
                (void) setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER,
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
        p->on_reply = on_reply;
        p->user_data = user_data;

        return p;
}

bool gateway_probe_send(struct gateway_probe *p, uint16_t seq)
{
        if (p->io == NULL && !probe_open(p))
                return false;

        uint8_t msg[sizeof(struct icmphdr) + PROBE_PAYLOAD_LEN];
        memset(msg, 0xa5, sizeof(msg));

        socklen_t len;

        if (p->source.ss_family == AF_INET) {
                struct icmphdr icmp = {
                        .type = ICMP_ECHO,
                        .code = 0,
                };
                icmp.un.echo.id = htons(p->ident);
                icmp.un.echo.sequence = htons(seq);
                memcpy(msg, &icmp, sizeof(icmp));
                icmp.checksum = inet_checksum(msg, sizeof(msg));
                memcpy(msg, &icmp, sizeof(icmp));
                len = sizeof(struct sockaddr_in);
        } else {
                // The kernel fills in the ICMPv6 checksum.
                struct icmp6_hdr icmp6 = {
                        .icmp6_type = ICMP6_ECHO_REQUEST,
                        .icmp6_code = 0,
                };
                icmp6.icmp6_id = htons(p->ident);
                icmp6.icmp6_seq = htons(seq);
                memcpy(msg, &icmp6, sizeof(icmp6));
                len = sizeof(struct sockaddr_in6);
        }

        ssize_t const n = sendto(l_io_get_fd(p->io), msg, sizeof(msg),
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
