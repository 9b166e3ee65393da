// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file kernel_subflows.c
 *
 * @brief Ask the kernel (sock_diag) which MPTCP subflows exist.
 *
 * A plain NETLINK_SOCK_DIAG dump of established TCP sockets, both
 * families; each MPTCP subflow carries an INET_DIAG_ULP_INFO
 * attribute named "mptcp" with the connection token, the address ids
 * and the subflow flags (the same data `ss -tni` prints as
 * "tcp-ulp-mptcp flags:... token:...").  The dump is synchronous and
 * bounded by the number of TCP sockets in the namespace; gwsteer
 * asks for it at start-up (connections that outlived an mptcpd
 * restart), after backup flag changes (the kernel sends no event
 * for a local priority change) and, with stall_ms, every 20 ms for
 * the subflows' ACK progress (tcp_info, which the dump carries).
 *
 * The second question, which local addresses (and address ids) a
 * connection's userspace path manager already holds, is a generic
 * netlink dump of MPTCP_PM_CMD_GET_ADDR with the connection's token
 * (Linux 6.7 and later), used when a restarted mptcpd announces its
 * addresses again on the connections it picked up.
 */

#include <errno.h>
#include <stddef.h>
#include <linux/genetlink.h>
#include <linux/inet_diag.h>
#include <linux/mptcp.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernel_subflows.h"

/// Receive buffer: one dump message holds many sockets.
#define DIAG_BUF_LEN 32768

/// Upper bound on dump messages read, so a broken kernel cannot hang us.
#define DIAG_MAX_MESSAGES 100000

/// Longest time one receive may block (the dump is local and fast).
#define DIAG_RECV_TIMEOUT_MS 500

/**
 * @brief Walk nested netlink attributes.
 */
static struct nlattr const *next_attr(struct nlattr const *a, size_t *left)
{
        size_t const len = NLA_ALIGN(a->nla_len);

        if (len > *left)
                return NULL;

        *left -= len;
        return (struct nlattr const *) ((char const *) a + len);
}

/**
 * @brief Is @a a a complete attribute within @a left bytes?
 */
static bool attr_ok(struct nlattr const *a, size_t left)
{
        return left >= sizeof(*a) && a->nla_len >= sizeof(*a)
                && a->nla_len <= left;
}

/**
 * @brief Read the MPTCP subflow attributes into @a sf.
 *
 * @return @c true if the token was present.
 */
static bool parse_mptcp_info(struct nlattr const *nest,
                             struct kernel_subflow *sf)
{
        size_t left = nest->nla_len - NLA_HDRLEN;
        bool have_token = false;

        for (struct nlattr const *a = (struct nlattr const *)
                     ((char const *) nest + NLA_HDRLEN);
             a != NULL && attr_ok(a, left);
             a = next_attr(a, &left)) {
                void const *const data = (char const *) a + NLA_HDRLEN;
                size_t const dlen = a->nla_len - NLA_HDRLEN;

                switch (a->nla_type & NLA_TYPE_MASK) {
                case MPTCP_SUBFLOW_ATTR_TOKEN_LOC:
                        if (dlen >= sizeof(sf->token)) {
                                memcpy(&sf->token, data, sizeof(sf->token));
                                have_token = true;
                        }
                        break;
                case MPTCP_SUBFLOW_ATTR_FLAGS:
                        if (dlen >= sizeof(sf->flags))
                                memcpy(&sf->flags, data, sizeof(sf->flags));
                        break;
                case MPTCP_SUBFLOW_ATTR_ID_LOC:
                        if (dlen >= 1)
                                memcpy(&sf->local_id, data, 1);
                        break;
                default:
                        break;
                }
        }

        return have_token;
}

/**
 * @brief Find the "mptcp" ULP info of one socket, if any.
 */
static bool parse_ulp(struct nlattr const *ulp, struct kernel_subflow *sf)
{
        size_t left = ulp->nla_len - NLA_HDRLEN;
        bool is_mptcp = false;
        struct nlattr const *info = NULL;

        for (struct nlattr const *a = (struct nlattr const *)
                     ((char const *) ulp + NLA_HDRLEN);
             a != NULL && attr_ok(a, left);
             a = next_attr(a, &left)) {
                char const *const data = (char const *) a + NLA_HDRLEN;
                size_t const dlen = a->nla_len - NLA_HDRLEN;

                if ((a->nla_type & NLA_TYPE_MASK) == INET_ULP_INFO_NAME)
                        is_mptcp = dlen >= 5 && strncmp(data, "mptcp", 5) == 0
                                && (dlen == 5 || data[5] == '\0');
                else if ((a->nla_type & NLA_TYPE_MASK) == INET_ULP_INFO_MPTCP)
                        info = a;
        }

        return is_mptcp && info != NULL && parse_mptcp_info(info, sf);
}

/**
 * @brief Note the TCP state gwsteer watches from a tcp_info attribute.
 *
 * The kernel sends as much of struct tcp_info as it has; an older or
 * newer layout is fine as long as it reaches the fields read here.
 */
static void parse_tcp_info(struct nlattr const *a, struct kernel_subflow *sf)
{
        struct tcp_info info;
        size_t const dlen = a->nla_len - NLA_HDRLEN;
        size_t const need = offsetof(struct tcp_info, tcpi_rttvar);

        if (dlen < need)
                return;

        memset(&info, 0, sizeof(info));
        memcpy(&info, (char const *) a + NLA_HDRLEN,
               dlen < sizeof(info) ? dlen : sizeof(info));

        sf->has_tcp_info = true;
        sf->unacked = info.tcpi_unacked;
        sf->last_ack_ms = info.tcpi_last_ack_recv;
        sf->rtt_us = info.tcpi_rtt;
}

/**
 * @brief Fill the socket addresses of @a sf from the diag message.
 */
static void fill_addrs(struct inet_diag_msg const *m,
                       struct kernel_subflow *sf)
{
        memset(&sf->laddr, 0, sizeof(sf->laddr));
        memset(&sf->raddr, 0, sizeof(sf->raddr));

        if (m->idiag_family == AF_INET) {
                struct sockaddr_in *const l = (struct sockaddr_in *) &sf->laddr;
                struct sockaddr_in *const r = (struct sockaddr_in *) &sf->raddr;

                l->sin_family = r->sin_family = AF_INET;
                memcpy(&l->sin_addr, m->id.idiag_src, 4);
                memcpy(&r->sin_addr, m->id.idiag_dst, 4);
                l->sin_port = m->id.idiag_sport;
                r->sin_port = m->id.idiag_dport;
        } else {
                struct sockaddr_in6 *const l =
                        (struct sockaddr_in6 *) &sf->laddr;
                struct sockaddr_in6 *const r =
                        (struct sockaddr_in6 *) &sf->raddr;

                l->sin6_family = r->sin6_family = AF_INET6;
                memcpy(&l->sin6_addr, m->id.idiag_src, 16);
                memcpy(&r->sin6_addr, m->id.idiag_dst, 16);
                l->sin6_port = m->id.idiag_sport;
                r->sin6_port = m->id.idiag_dport;
        }
}

/**
 * @brief Handle one inet_diag message.
 */
static void handle_msg(struct nlmsghdr const *nlh,
                       kernel_subflow_cb cb,
                       void *user_data)
{
        if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                return;

        struct inet_diag_msg const *const m = NLMSG_DATA(nlh);
        size_t left = nlh->nlmsg_len
                - NLMSG_LENGTH(sizeof(struct inet_diag_msg));
        struct kernel_subflow sf = { 0 };
        bool mptcp = false;

        for (struct nlattr const *a = (struct nlattr const *) (m + 1);
             a != NULL && attr_ok(a, left);
             a = next_attr(a, &left))
                if ((a->nla_type & NLA_TYPE_MASK) == INET_DIAG_ULP_INFO)
                        mptcp = mptcp || parse_ulp(a, &sf);
                else if ((a->nla_type & NLA_TYPE_MASK) == INET_DIAG_INFO)
                        parse_tcp_info(a, &sf);

        if (mptcp) {
                fill_addrs(m, &sf);
                cb(&sf, user_data);
        }
}

/**
 * @brief Handler of one message of a netlink dump.
 */
typedef void (*dump_handler)(struct nlmsghdr const *nlh, void *ctx);

/**
 * @brief Read a netlink dump to its end, at most DIAG_MAX_MESSAGES.
 *
 * @return 0 at NLMSG_DONE, else an errno value (the kernel's error
 *         for a refused request).
 */
static int read_dump(int fd, dump_handler handle, void *ctx)
{
        /* Not static: a handler may read a dump of its own (adopting a
         * proxy's connections re-announces its addresses), which would
         * overwrite a shared buffer under this walk's remaining messages.
         */
        _Alignas(struct nlmsghdr) char buf[DIAG_BUF_LEN];

        for (int messages = 0; messages < DIAG_MAX_MESSAGES; ) {
                ssize_t const n = recv(fd, buf, sizeof(buf), 0);

                if (n < 0)
                        return errno;
                if (n == 0)
                        return EPIPE;

                size_t len = (size_t) n;

                for (struct nlmsghdr const *nlh = (struct nlmsghdr *) buf;
                     NLMSG_OK(nlh, len);
                     nlh = NLMSG_NEXT(nlh, len), ++messages) {
                        if (nlh->nlmsg_type == NLMSG_DONE)
                                return 0;

                        if (nlh->nlmsg_type == NLMSG_ERROR) {
                                struct nlmsgerr const *const e =
                                        NLMSG_DATA(nlh);
                                return e->error ? -e->error : EPROTO;
                        }

                        handle(nlh, ctx);
                }
        }

        return E2BIG;
}

/// A subflow callback and its argument, for handle_diag().
struct subflow_walk
{
        kernel_subflow_cb cb;
        void *user_data;
};

/**
 * @brief dump_handler for sock_diag messages.
 */
static void handle_diag(struct nlmsghdr const *nlh, void *ctx)
{
        struct subflow_walk const *const w = ctx;

        handle_msg(nlh, w->cb, w->user_data);
}

/**
 * @brief Dump one address family.
 */
static int walk_family(int fd, int family, kernel_subflow_cb cb,
                       void *user_data)
{
        struct {
                struct nlmsghdr nlh;
                struct inet_diag_req_v2 req;
        } request = {
                .nlh = {
                        .nlmsg_len = sizeof(request),
                        .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                        .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                        .nlmsg_seq = (uint32_t) family,
                },
                .req = {
                        .sdiag_family = (uint8_t) family,
                        .sdiag_protocol = IPPROTO_TCP,
                        .idiag_states = 1u << TCP_ESTABLISHED,
                        // The kernel adds ULP info only along with tcp_info.
                        .idiag_ext = 1u << (INET_DIAG_INFO - 1),
                },
        };
        struct subflow_walk w = { .cb = cb, .user_data = user_data };

        if (send(fd, &request, sizeof(request), 0) < 0)
                return errno;

        return read_dump(fd, handle_diag, &w);
}

int kernel_subflows_walk(kernel_subflow_cb cb, void *user_data)
{
        int const fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
                              NETLINK_SOCK_DIAG);

        if (fd < 0)
                return errno;

        struct timeval const tv = { .tv_usec = DIAG_RECV_TIMEOUT_MS * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

        int err = walk_family(fd, AF_INET, cb, user_data);
        if (err == 0)
                err = walk_family(fd, AF_INET6, cb, user_data);

        close(fd);
        return err;
}

bool kernel_subflow_backup(struct kernel_subflow const *sf)
{
        return (sf->flags & MPTCP_SUBFLOW_FLAG_BKUP_LOC) != 0;
}

bool kernel_subflow_initial_client(struct kernel_subflow const *sf)
{
        return (sf->flags & MPTCP_SUBFLOW_FLAG_MCAP_LOC) != 0;
}

bool kernel_subflow_initial_server(struct kernel_subflow const *sf)
{
        return (sf->flags & (MPTCP_SUBFLOW_FLAG_MCAP_LOC
                             | MPTCP_SUBFLOW_FLAG_JOIN_LOC
                             | MPTCP_SUBFLOW_FLAG_JOIN_REM)) == 0;
}

// ----------------------------------------------------------------
//        Userspace PM: a connection's local address list
// ----------------------------------------------------------------

/**
 * @brief Generic netlink request: header, family header, attributes.
 */
struct genl_request
{
        struct nlmsghdr nlh;
        struct genlmsghdr genl;
        char attrs[64];
};

/**
 * @brief Append a flat attribute to @a r.
 */
static void put_attr(struct genl_request *r, uint16_t type,
                     void const *data, uint16_t len)
{
        struct nlattr *const a =
                (struct nlattr *) ((char *) r + NLMSG_ALIGN(r->nlh.nlmsg_len));

        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        memcpy((char *) a + NLA_HDRLEN, data, len);
        r->nlh.nlmsg_len = NLMSG_ALIGN(r->nlh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/**
 * @brief Resolve the "mptcp_pm" generic netlink family id.
 *
 * @return 0 and the id in @a family, or an errno value.
 */
static int resolve_mptcp_pm(int fd, uint16_t *family)
{
        struct genl_request r = {
                .nlh = {
                        .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN),
                        .nlmsg_type = GENL_ID_CTRL,
                        .nlmsg_flags = NLM_F_REQUEST,
                        .nlmsg_seq = 1,
                },
                .genl = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 },
        };
        static char buf[DIAG_BUF_LEN];

        put_attr(&r, CTRL_ATTR_FAMILY_NAME, MPTCP_PM_NAME,
                 sizeof(MPTCP_PM_NAME));

        if (send(fd, &r, r.nlh.nlmsg_len, 0) < 0)
                return errno;

        ssize_t const n = recv(fd, buf, sizeof(buf), 0);

        if (n < 0)
                return errno;

        struct nlmsghdr const *const nlh = (struct nlmsghdr *) buf;
        size_t len = (size_t) n;

        if (!NLMSG_OK(nlh, len))
                return EPROTO;
        if (nlh->nlmsg_type == NLMSG_ERROR) {
                struct nlmsgerr const *const e = NLMSG_DATA(nlh);
                return e->error ? -e->error : EPROTO;
        }
        if (nlh->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
                return EPROTO;

        size_t left = nlh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

        for (struct nlattr const *a = (struct nlattr const *)
                     ((char const *) NLMSG_DATA(nlh) + GENL_HDRLEN);
             a != NULL && attr_ok(a, left);
             a = next_attr(a, &left))
                if ((a->nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID
                    && a->nla_len >= NLA_HDRLEN + sizeof(*family)) {
                        memcpy(family, (char const *) a + NLA_HDRLEN,
                               sizeof(*family));
                        return 0;
                }

        return ENOENT;
}

/// An address callback and its argument, for handle_addr().
struct addr_walk
{
        kernel_addr_cb cb;
        void *user_data;
};

/**
 * @brief dump_handler for MPTCP_PM_CMD_GET_ADDR answers.
 */
static void handle_addr(struct nlmsghdr const *nlh, void *ctx)
{
        struct addr_walk const *const w = ctx;

        if (nlh->nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
                return;

        size_t left = nlh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

        for (struct nlattr const *a = (struct nlattr const *)
                     ((char const *) NLMSG_DATA(nlh) + GENL_HDRLEN);
             a != NULL && attr_ok(a, left);
             a = next_attr(a, &left)) {
                if ((a->nla_type & NLA_TYPE_MASK) != MPTCP_PM_ATTR_ADDR)
                        continue;

                struct kernel_addr ka = { 0 };
                uint16_t family = 0;
                uint16_t port = 0;
                bool have_id = false;
                bool have_ip = false;
                size_t inner = a->nla_len - NLA_HDRLEN;

                for (struct nlattr const *b = (struct nlattr const *)
                             ((char const *) a + NLA_HDRLEN);
                     b != NULL && attr_ok(b, inner);
                     b = next_attr(b, &inner)) {
                        void const *const data = (char const *) b + NLA_HDRLEN;
                        size_t const dlen = b->nla_len - NLA_HDRLEN;
                        struct sockaddr_in *const in =
                                (struct sockaddr_in *) &ka.addr;
                        struct sockaddr_in6 *const in6 =
                                (struct sockaddr_in6 *) &ka.addr;

                        switch (b->nla_type & NLA_TYPE_MASK) {
                        case MPTCP_PM_ADDR_ATTR_FAMILY:
                                if (dlen >= sizeof(family))
                                        memcpy(&family, data, sizeof(family));
                                break;
                        case MPTCP_PM_ADDR_ATTR_ID:
                                if (dlen >= 1) {
                                        memcpy(&ka.id, data, 1);
                                        have_id = true;
                                }
                                break;
                        case MPTCP_PM_ADDR_ATTR_PORT:  // Host byte order.
                                if (dlen >= sizeof(port))
                                        memcpy(&port, data, sizeof(port));
                                break;
                        case MPTCP_PM_ADDR_ATTR_ADDR4:
                                if (dlen >= sizeof(in->sin_addr)) {
                                        memcpy(&in->sin_addr, data,
                                               sizeof(in->sin_addr));
                                        have_ip = true;
                                }
                                break;
                        case MPTCP_PM_ADDR_ATTR_ADDR6:
                                if (dlen >= sizeof(in6->sin6_addr)) {
                                        memcpy(&in6->sin6_addr, data,
                                               sizeof(in6->sin6_addr));
                                        have_ip = true;
                                }
                                break;
                        default:
                                break;
                        }
                }

                if (!have_id || !have_ip
                    || (family != AF_INET && family != AF_INET6))
                        continue;

                ka.addr.ss_family = family;
                if (family == AF_INET)
                        ((struct sockaddr_in *) &ka.addr)->sin_port =
                                htons(port);
                else
                        ((struct sockaddr_in6 *) &ka.addr)->sin6_port =
                                htons(port);

                w->cb(&ka, w->user_data);
        }
}

int kernel_addrs_walk(uint32_t token, kernel_addr_cb cb, void *user_data)
{
        int const fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
                              NETLINK_GENERIC);

        if (fd < 0)
                return errno;

        struct timeval const tv = { .tv_usec = DIAG_RECV_TIMEOUT_MS * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

        uint16_t family = 0;
        int err = resolve_mptcp_pm(fd, &family);

        if (err == 0) {
                struct genl_request r = {
                        .nlh = {
                                .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN),
                                .nlmsg_type = family,
                                .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                                .nlmsg_seq = 2,
                        },
                        .genl = { .cmd = MPTCP_PM_CMD_GET_ADDR,
                                  .version = MPTCP_PM_VER },
                };
                struct addr_walk w = { .cb = cb, .user_data = user_data };

                put_attr(&r, MPTCP_PM_ATTR_TOKEN, &token, sizeof(token));

                err = send(fd, &r, r.nlh.nlmsg_len, 0) < 0
                        ? errno
                        : read_dump(fd, handle_addr, &w);
        }

        close(fd);
        return err;
}
