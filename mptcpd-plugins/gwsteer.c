// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gwsteer.c
 *
 * @brief braid gateway-steering path manager plugin for mptcpd.
 *
 * Binder (LCDNet'13) spread one MPTCP connection over several
 * community-network gateways by giving subflow k an IPv4 loose source
 * route through gateway k.  gwsteer does the same job on upstream
 * Linux with the kernel's userspace path manager:
 *
 * - Steering is routing, installed once by the routing helper
 *   (gwsteer-route): traffic from a gateway's source address follows a
 *   policy route via an on-link gateway, or an SRv6 segment list for a
 *   gateway several hops away.  So "one subflow through gateway k" is
 *   simply "one subflow from source address k".
 * - Client role: when a connection is established, open one subflow
 *   per healthy gateway (source_k -> the peer), backup flag per
 *   gateway; when a gateway fails, remove its subflows at once; when
 *   it recovers, give every live connection a subflow through it again
 *   (Binder never did).  Optionally (stall_ms) a subflow that stops
 *   acknowledging gets the backup flag, or is removed (stall_remove),
 *   before its gateway is declared down.
 * - Proxy role: announce extra addresses and accept at most
 *   max_subflows subflows per connection; the kernel's userspace PM
 *   accepts every MP_JOIN while mptcpd runs, so excess joins are
 *   closed as soon as they are reported.
 * - A gateway may follow an interface (interface = wan0): its source
 *   is the interface's current address; mptcpd's network monitor events
 *   say when to look.  A new address moves the gateway's subflows to
 *   it, and the gateway is down while the interface is absent, down or
 *   without a usable address.
 *
 * Gateway health and preference live in gateway_health.c, the status
 * file in status_file.c, the configuration in gateway_config.c.
 */

#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_addr.h>
#include <net/if.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <ell/ell.h>

#include <mptcpd/id_manager.h>
#include <mptcpd/listener_manager.h>
#include <mptcpd/network_monitor.h>
#include <mptcpd/path_manager.h>
#include <mptcpd/plugin.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "kernel_subflows.h"
#include "status_file.h"

/// Delay used to coalesce status file writes after bursts of events.
#define STATUS_COALESCE_MS 20

/// Longest back-off before re-opening a subflow that keeps closing.
#define MAX_RETRY_BACKOFF_MS 30000

/// Delay before asking the kernel whether backup flag requests applied.
#define BACKUP_VERIFY_MS 50

/// How often the client reads its subflows' ACK progress (stall_ms).
#define STALL_POLL_MS 20

/// Tolerance on the kernel's millisecond "last ACK" age, microseconds.
#define STALL_ACK_SLACK_US 2000

/**
 * @struct gwsteer_subflow
 *
 * @brief One subflow of a tracked connection.
 *
 * Tracked from the kernel's report (new_subflow, or the sock_diag
 * dump at start-up) until the kernel reports it closed: a removal
 * that was requested but not yet confirmed keeps the subflow here,
 * marked @c closing, so a request that was lost or refused is
 * noticed and sent again.
 */
struct gwsteer_subflow
{
        /// Local address and port.
        struct sockaddr_storage laddr;

        /// Remote address and port.
        struct sockaddr_storage raddr;

        /// Gateway the local address belongs to, or @c NULL.
        struct gateway *gw;

        /// Backup flag as the kernel last showed it (if @c backup_known).
        bool backup;

        /**
         * @brief Whether @c backup comes from the kernel.
         *
         * mptcpd 0.12 reports every new subflow with backup set
         * (it passes on the presence of the attribute, not its
         * value), so the flag of a reported subflow is unknown until
         * the kernel's sock_diag view shows it.
         */
        bool backup_known;

        /// A backup flag change was requested and is not confirmed yet.
        bool backup_requested;

        /// Value of the unconfirmed request.
        bool backup_wanted;

        /// Monotonic time of the last backup request, microseconds.
        uint64_t backup_request_us;

        /// Removal requested, the kernel has not reported it closed yet.
        bool closing;

        /// Monotonic time of the last removal request, microseconds.
        uint64_t closing_since_us;

        /**
         * @brief Client: since when data has been outstanding without
         *        an ACK (monotonic microseconds), or 0.
         *
         * The first poll that saw unacknowledged data and no ACK after
         * the previous value; a lower bound of how long the subflow
         * has been silent (stall_ms).
         */
        uint64_t quiet_since_us;

        /// Client: silent past stall_ms, so it gets no new data.
        bool stalled;

        /// Monotonic time the subflow was reported, microseconds.
        uint64_t since_us;
};

/**
 * @struct gwsteer_announce
 *
 * @brief One proxy address announced on every connection.
 *
 * mptcpd opens a listening socket for each ADD_ADDR, keyed by address
 * and port, reference counted.  Announcing with port 0 would make a
 * new ephemeral listener per connection that nobody closes, so the
 * first announcement picks the port and keeps that listener for the
 * life of the plugin; later connections announce the same port (one
 * more reference) and give their reference back when they close.
 */
struct gwsteer_announce
{
        /// Address and, once listening, the listener's port.
        struct sockaddr_storage addr;

        /// The plugin holds the base reference of a listener.
        bool listening;
};

/**
 * @struct gwsteer_connection
 *
 * @brief One MPTCP connection this instance manages.
 */
struct gwsteer_connection
{
        /// MPTCP connection token.
        mptcpd_token_t token;

        /// Whether the connection reached the established state.
        bool established;

        /// Peer address and port of the initial subflow.
        struct sockaddr_storage remote;

        /// Gateways (bit = index) that serve this peer (peers = ...).
        uint32_t served;

        /// Client: the gateway prefer_best keeps non-backup, or NULL.
        struct gateway const *best;

        /// Live subflows (struct gwsteer_subflow *).
        struct l_queue *subflows;

        /// Gateways (bit = index) with a subflow request in flight.
        uint32_t pending;

        /// Monotonic time of each request in flight, microseconds.
        uint64_t pending_since_us[GWSTEER_MAX_GATEWAYS];

        /**
         * @brief Per gateway: no new subflow before this time.
         *
         * Set when a subflow closes without us asking (a peer that
         * refuses joins, a path that resets) or a request times out:
         * retrying at once would churn.  Cleared when the gateway
         * changes state, so a recovered gateway is re-used at once.
         */
        uint64_t retry_after_us[GWSTEER_MAX_GATEWAYS];

        /// Per gateway: current retry back-off, milliseconds.
        unsigned int backoff_ms[GWSTEER_MAX_GATEWAYS];

        /// Announcements (bit = index) holding a listener reference.
        uint32_t announced;
};

/**
 * @struct gwsteer_state
 *
 * @brief Everything the plugin owns; created in init, freed in exit.
 */
struct gwsteer_state
{
        /// Validated configuration.
        struct gwsteer_config *config;

        /// Gateway health tracker.
        struct gateway_health *health;

        /// Tracked connections, keyed by token.
        struct l_hashmap *connections;

        /// mptcpd path manager, for commands issued from timers.
        struct mptcpd_pm *pm;

        /// Proxy: announced addresses (struct gwsteer_announce *).
        struct l_queue *announce;

        /// Periodic status rewrite and maintenance timer.
        struct l_timeout *maintenance;

        /// One-shot coalesced status write, @c NULL if none pending.
        struct l_timeout *status_write;

        /// One-shot kernel check of backup requests, or @c NULL.
        struct l_timeout *backup_verify;

        /// Client with stall_ms: periodic read of ACK progress, or @c NULL.
        struct l_timeout *stall_poll;

        /// Deferred reaction to health changes, or @c NULL.
        struct l_idle *health_idle;

        /// One-shot reconcile when a retry or request is due, or @c NULL.
        struct l_timeout *due;

        /// Monotonic time @c due fires, microseconds.
        uint64_t due_at_us;

        /// Pick-up of existing connections once mptcpd is up, or @c NULL.
        struct l_idle *adopt_idle;

        /// Gateways (bit = index) that changed state since the last run.
        uint32_t changed_gateways;

        /// When each gateway last changed (l_time_now()), for the run.
        uint64_t changed_at_us[GWSTEER_MAX_GATEWAYS];
};

/// Name under which the path manager operations are registered.
#define GWSTEER_PLUGIN_NAME "gwsteer"

/**
 * @brief Tell mptcpd which plugin manages a connection (libmptcpd).
 *
 * mptcpd routes a connection's events to the plugin it saw create
 * the connection, and drops the events of connections it never saw
 * ("Unable to match token to plugin").  libmptcpd 0.12 exports this
 * function (declared in a private header, so not installed): it maps
 * the token to the named plugin and calls its new_connection
 * operation, which is what a connection that outlived an mptcpd
 * restart needs.
 */
void mptcpd_plugin_new_connection(char const *name,
                                  mptcpd_token_t token,
                                  struct sockaddr const *laddr,
                                  struct sockaddr const *raddr,
                                  bool server_side,
                                  struct mptcpd_pm *pm);

/// Plugin state (single instance per mptcpd process).
static struct gwsteer_state *gwsteer;

static void schedule_backup_verify(void);
static void settle_interfaces(struct sockaddr const *added);
static void reconcile_all(void);

/**
 * @brief Size of the sockaddr in @a ss for its family.
 */
static size_t sockaddr_len(struct sockaddr const *sa)
{
        return sa->sa_family == AF_INET
                ? sizeof(struct sockaddr_in)
                : sizeof(struct sockaddr_in6);
}

/**
 * @brief Copy a sockaddr of either family into storage.
 */
static void copy_sockaddr(struct sockaddr_storage *dst,
                          struct sockaddr const *src)
{
        memset(dst, 0, sizeof(*dst));
        if (src != NULL)
                memcpy(dst, src, sockaddr_len(src));
}

/**
 * @brief Port of a socket address (network byte order).
 */
static in_port_t sockaddr_port(struct sockaddr const *sa)
{
        return sa->sa_family == AF_INET
                ? ((struct sockaddr_in const *) sa)->sin_port
                : ((struct sockaddr_in6 const *) sa)->sin6_port;
}

/**
 * @brief Do two socket addresses have the same IP and port?
 */
static bool same_endpoint(struct sockaddr const *a, struct sockaddr const *b)
{
        return gwsteer_same_ip(a, b) && sockaddr_port(a) == sockaddr_port(b);
}

/**
 * @brief Log-friendly "addr" text of a sockaddr.
 */
static char const *addr_text(struct sockaddr const *sa, char *buf, size_t len)
{
        return gwsteer_ntop(sa, buf, len);
}

/**
 * @brief The gateway @a sf goes through, if it still leaves from the
 *        gateway's current address.
 *
 * A subflow of a gateway that moved to a new address (DHCP renew, RA)
 * keeps its gateway for the log but is stale: it is closed, and a
 * subflow from the new address takes its place.
 */
static struct gateway *current_gw(struct gwsteer_subflow const *sf)
{
        if (sf->gw == NULL
            || !gwsteer_same_ip((struct sockaddr const *) &sf->laddr,
                                (struct sockaddr const *) &sf->gw->source))
                return NULL;

        return sf->gw;
}

// ----------------------------------------------------------------
//                     Status file scheduling
// ----------------------------------------------------------------

/**
 * @brief l_hashmap_foreach() helper for recount_subflows().
 */
static void count_connection(void const *key, void *value, void *user_data)
{
        struct gwsteer_connection const *const conn = value;

        (void) key;
        (void) user_data;

        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gateway *const gw = current_gw(e->data);

                if (gw != NULL)
                        ++gw->subflows;
        }
}

/**
 * @brief Recount live subflows per gateway over all connections.
 */
static void recount_subflows(void)
{
        for (struct l_queue_entry const *e =
                     l_queue_get_entries(
                             gateway_health_gateways(gwsteer->health));
             e;
             e = e->next)
                ((struct gateway *) e->data)->subflows = 0;

        l_hashmap_foreach(gwsteer->connections, count_connection, NULL);
}

/**
 * @brief Write the status file now, with fresh subflow counts.
 */
static void write_status(void)
{
        recount_subflows();
        status_file_write(gwsteer->config->status_file, gwsteer->health);
}

/**
 * @brief One-shot timer: coalesced status write.
 */
static void on_status_write(struct l_timeout *timeout, void *user_data)
{
        (void) user_data;

        l_timeout_remove(timeout);
        gwsteer->status_write = NULL;
        write_status();
}

/**
 * @brief Ask for a status write soon, coalescing bursts of events.
 */
static void status_changed(void)
{
        if (gwsteer->status_write == NULL)
                gwsteer->status_write =
                        l_timeout_create_ms(STATUS_COALESCE_MS,
                                            on_status_write, NULL, NULL);
}

/**
 * @brief Due timer callback: a retry or a request time-out is due.
 */
static void on_due(struct l_timeout *timeout, void *user_data)
{
        (void) user_data;

        l_timeout_remove(timeout);
        gwsteer->due = NULL;
        reconcile_all();
}

/**
 * @brief Reconcile again at @a at_us (monotonic) at the latest.
 *
 * A retry after its back-off and a subflow request that never produced
 * a subflow are due at their own time.  The maintenance run follows
 * status_interval_ms, the status file's rewrite period, which an
 * operator may set to minutes to spare a flash disk.
 */
static void reconcile_at(uint64_t at_us)
{
        uint64_t const now = l_time_now();
        unsigned int const ms = at_us > now
                ? (unsigned int) ((at_us - now + 999) / 1000)
                : 1;

        if (gwsteer->due != NULL && gwsteer->due_at_us <= at_us)
                return;

        gwsteer->due_at_us = at_us;
        if (gwsteer->due == NULL)
                gwsteer->due = l_timeout_create_ms(ms, on_due, NULL, NULL);
        else
                l_timeout_modify_ms(gwsteer->due, ms);
}

/**
 * @brief Reconcile again once the time-out ending at @a expiry_us has
 *        passed: its check is "now > expiry", so a millisecond later.
 */
static void reconcile_after(uint64_t expiry_us)
{
        reconcile_at(expiry_us + 1000);
}

// ----------------------------------------------------------------
//                     Connection bookkeeping
// ----------------------------------------------------------------

/**
 * @brief Give back the listener references a connection holds.
 */
static void release_announcements(struct gwsteer_connection *conn)
{
        struct mptcpd_lm *const lm = mptcpd_pm_get_lm(gwsteer->pm);
        unsigned int i = 0;

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(gwsteer->announce);
             e;
             e = e->next, ++i) {
                struct gwsteer_announce *const a = e->data;

                if (conn->announced & (1u << i))
                        (void) mptcpd_lm_close(lm,
                                               (struct sockaddr *) &a->addr);
        }

        conn->announced = 0;
}

/**
 * @brief Free a tracked connection (and its listener references).
 */
static void connection_destroy(void *data)
{
        struct gwsteer_connection *const conn = data;

        if (gwsteer != NULL && gwsteer->pm != NULL && conn->announced)
                release_announcements(conn);

        l_queue_destroy(conn->subflows, l_free);
        l_free(conn);
}

/**
 * @brief Find a tracked connection by token.
 */
static struct gwsteer_connection *find_connection(mptcpd_token_t token)
{
        return l_hashmap_lookup(gwsteer->connections, L_UINT_TO_PTR(token));
}

/**
 * @brief Find a subflow of @a conn by its exact endpoints.
 */
static struct gwsteer_subflow *find_subflow(struct gwsteer_connection *conn,
                                            struct sockaddr const *laddr,
                                            struct sockaddr const *raddr)
{
        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow *const sf = e->data;

                if (same_endpoint((struct sockaddr *) &sf->laddr, laddr)
                    && same_endpoint((struct sockaddr *) &sf->raddr, raddr))
                        return sf;
        }

        return NULL;
}

/**
 * @brief Number of subflows of @a conn through @a gw, removals excluded.
 */
static unsigned int subflows_on(struct gwsteer_connection const *conn,
                                struct gateway const *gw)
{
        unsigned int n = 0;

        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow const *const sf = e->data;

                n += current_gw(sf) == gw && !sf->closing;
        }

        return n;
}

/**
 * @brief Subflows of @a conn that are not being removed.
 */
static unsigned int live_subflows(struct gwsteer_connection const *conn)
{
        unsigned int n = 0;

        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next)
                n += !((struct gwsteer_subflow *) e->data)->closing;

        return n;
}

/**
 * @brief Track a subflow of @a conn.
 */
static struct gwsteer_subflow *add_tracked_subflow(
        struct gwsteer_connection *conn,
        struct sockaddr const *laddr,
        struct sockaddr const *raddr,
        struct kernel_subflow const *ksf)
{
        struct gwsteer_subflow *const sf = l_new(struct gwsteer_subflow, 1);

        copy_sockaddr(&sf->laddr, laddr);
        copy_sockaddr(&sf->raddr, raddr);
        sf->gw = gateway_health_find(gwsteer->health, laddr);
        sf->backup_known = ksf != NULL;
        sf->backup = ksf != NULL && kernel_subflow_backup(ksf);
        sf->since_us = l_time_now();
        l_queue_push_tail(conn->subflows, sf);

        return sf;
}

/**
 * @brief When the removal of @a sf counts as never confirmed (monotonic
 *        us): it is asked again after that.
 */
static uint64_t removal_expiry(struct gwsteer_subflow const *sf)
{
        return sf->closing_since_us
                + (uint64_t) gwsteer->config->subflow_timeout_ms * 1000;
}

/**
 * @brief Ask the kernel to close a subflow.
 *
 * The subflow stays tracked, marked @c closing, until the kernel
 * reports it closed: a request that could not be sent, or that the
 * kernel refused, is sent again by a later reconcile.
 */
static void close_subflow(struct gwsteer_connection *conn,
                          struct gwsteer_subflow *sf,
                          char const *why)
{
        char l[INET6_ADDRSTRLEN];
        char r[INET6_ADDRSTRLEN];
        int const err = mptcpd_pm_remove_subflow(
                gwsteer->pm, conn->token,
                (struct sockaddr *) &sf->laddr,
                (struct sockaddr *) &sf->raddr);

        char const *const local =
                addr_text((struct sockaddr *) &sf->laddr, l, sizeof(l));
        char const *const remote =
                addr_text((struct sockaddr *) &sf->raddr, r, sizeof(r));

        /*
         * Either way the retry comes at its own time, not at the next
         * maintenance run (status_interval_ms, minutes on some boxes):
         * a request not sent after the first back-off step, one the
         * kernel never confirmed after subflow_timeout_ms.
         */
        if (err != 0) {
                l_error("token %08x: closing subflow %s -> %s (%s): "
                        "request not sent, will retry: %s",
                        conn->token, local, remote, why, strerror(err));
                reconcile_at(l_time_now()
                             + (uint64_t) gwsteer->config->probe_interval_ms
                               * 1000);
                return;
        }

        l_info("token %08x: closing subflow %s -> %s (%s)",
               conn->token, local, remote, why);
        sf->closing = true;
        sf->closing_since_us = l_time_now();
        reconcile_after(removal_expiry(sf));
        status_changed();
}

/**
 * @brief When the subflow request of @a conn through @a gw times out
 *        (monotonic us): the kernel never made the subflow by then.
 */
static uint64_t request_expiry(struct gwsteer_connection const *conn,
                               struct gateway const *gw)
{
        return conn->pending_since_us[gw->index]
                + (uint64_t) gwsteer->config->subflow_timeout_ms * 1000;
}

/**
 * @brief Ask the kernel for a subflow of @a conn through @a gw.
 */
static void open_subflow(struct gwsteer_connection *conn, struct gateway *gw)
{
        struct mptcpd_idm *const idm = mptcpd_pm_get_idm(gwsteer->pm);
        struct sockaddr const *const source =
                (struct sockaddr const *) &gw->source;
        char l[INET6_ADDRSTRLEN];
        char r[INET6_ADDRSTRLEN];

        if (source->sa_family == AF_UNSPEC)
                return;  // Its interface has no address (down anyway).

        mptcpd_aid_t const id = mptcpd_idm_get_id(idm, source);

        if (id == 0) {
                l_error("gateway %s: no MPTCP address id for its source",
                        gw->spec->id);
                return;
        }

        /*
         * Remote id 0: the peer's address of the initial subflow.  The
         * backup flag is applied once the subflow exists (new_subflow),
         * because the kernel ignores flags on SUBFLOW_CREATE.
         *
         * The kernel answers asynchronously: mptcpd logs a refusal as
         * "add_subflow: <reason>: <error>" right after this request's
         * log line, and the request then times out here
         * (subflow_timeout_ms), which probes the gateway and retries
         * with back-off.
         */
        l_info("token %08x: opening subflow via %s: %s (id %u) -> %s",
               conn->token, gw->spec->id,
               addr_text(source, l, sizeof(l)), id,
               addr_text((struct sockaddr *) &conn->remote, r, sizeof(r)));

        int const err = mptcpd_pm_add_subflow(gwsteer->pm, conn->token,
                                              id, 0, source,
                                              (struct sockaddr *)
                                              &conn->remote,
                                              false);
        if (err != 0) {
                l_error("token %08x: subflow via %s: request not sent "
                        "(mptcpd error %d)", conn->token, gw->spec->id, err);
                return;
        }

        conn->pending |= 1u << gw->index;
        conn->pending_since_us[gw->index] = l_time_now();
        reconcile_after(request_expiry(conn, gw));
}

/**
 * @brief Delay the next subflow through @a gw.
 *
 * Doubles from probe_interval_ms up to MAX_RETRY_BACKOFF_MS; back_off()
 * also probes the gateway out of cycle (a failed subflow is a hint).
 */
static void delay_retry(struct gwsteer_connection *conn, struct gateway *gw,
                        char const *why)
{
        unsigned int *const backoff = &conn->backoff_ms[gw->index];

        *backoff = *backoff == 0
                ? gwsteer->config->probe_interval_ms
                : *backoff * 2;
        if (*backoff > MAX_RETRY_BACKOFF_MS)
                *backoff = MAX_RETRY_BACKOFF_MS;
        conn->retry_after_us[gw->index] =
                l_time_now() + (uint64_t) *backoff * 1000;
        reconcile_at(conn->retry_after_us[gw->index]);

        l_debug("token %08x: subflow via %s %s, retry in %u ms",
                conn->token, gw->spec->id, why, *backoff);
}

/**
 * @brief Back off before the next subflow through @a gw, and probe it.
 */
static void back_off(struct gwsteer_connection *conn, struct gateway *gw,
                     char const *why)
{
        delay_retry(conn, gw, why);
        gateway_health_suspect(gwsteer->health, gw);
}

/**
 * @brief A subflow through @a gw closed without being asked to.
 *
 * One that lived longer than the back-off in force worked for a while:
 * its close is a new failure, not the next in a series, and the
 * back-off starts again from its first step.  Without this, a
 * long-lived connection whose path resets now and then would wait
 * ever longer, up to MAX_RETRY_BACKOFF_MS, for each new subflow.
 */
static void subflow_failed(struct gwsteer_connection *conn,
                           struct gateway *gw,
                           struct gwsteer_subflow const *sf)
{
        if (sf != NULL
            && l_time_now() - sf->since_us
               >= (uint64_t) conn->backoff_ms[gw->index] * 1000)
                conn->backoff_ms[gw->index] = 0;

        back_off(conn, gw, "closed");
}

/**
 * @brief Choose the gateway of @a conn that prefer_best keeps
 *        non-backup.
 *
 * The health tracker's best if it serves the connection's peer.  The
 * best overall may not (an IPv6 gateway and an IPv4 peer, a tunnel's
 * gateway limited by peers =): flagging every subflow of the
 * connection backup would leave the kernel no preference at all.  The
 * best of the gateways that serve it is then elected the tracker's way.
 */
static void choose_best(struct gwsteer_connection *conn)
{
        struct gateway const *const overall =
                gateway_health_best(gwsteer->health);

        if (overall != NULL && (conn->served & (1u << overall->index)))
                conn->best = overall;
        else
                conn->best = gateway_health_choose_best(gwsteer->health,
                                                        conn->served,
                                                        conn->best);
}

/**
 * @brief Whether @a gw is a backup for @a conn: configured so, or,
 *        with prefer_best, not the connection's best gateway.
 */
static bool is_backup_for(struct gwsteer_connection const *conn,
                          struct gateway const *gw)
{
        return gateway_health_is_backup_beside(gwsteer->health, gw,
                                               conn->best);
}

/**
 * @brief Gateway order for opening subflows of a connection (@a
 *        user_data): the preferred first.
 *
 * Non-backup before backup, then the connection's best gateway, then
 * higher AvMet score, then file order; so with max_subflows smaller
 * than the number of gateways the subflows go to the gateways the
 * health tracker prefers, not to the first ones in the file.
 */
static int preference_compare(void const *a, void const *b, void *user_data)
{
        struct gateway const *const x = a;
        struct gateway const *const y = b;
        struct gwsteer_connection const *const conn = user_data;
        struct gateway const *const best = conn->best;
        bool const xb = is_backup_for(conn, x);
        bool const yb = is_backup_for(conn, y);

        if (xb != yb)
                return xb ? 1 : -1;
        if ((x == best) != (y == best))
                return x == best ? -1 : 1;
        if (x->avmet != y->avmet)
                return x->avmet > y->avmet ? -1 : 1;

        return (int) x->index - (int) y->index;
}

/**
 * @brief Whether @a conn has a subflow other than @a sf still moving data.
 */
static bool other_subflow_flowing(struct gwsteer_connection const *conn,
                                  struct gwsteer_subflow const *sf)
{
        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow const *const other = e->data;

                if (other != sf && !other->closing && !other->stalled)
                        return true;
        }

        return false;
}

/**
 * @brief The backup flag gwsteer wants on a client subflow.
 *
 * Its gateway's (configuration, preference), and also set while the
 * subflow is stalled (stall_ms) and the connection has another one
 * that is not: the kernel's scheduler queues no new data on a backup
 * subflow while a non-backup one is usable, so a gateway that stopped
 * forwarding stops swallowing new data before it is declared down.
 * The data it already holds stays there until the subflow is removed
 * (the kernel then re-injects every unacknowledged byte of the
 * connection) or the kernel marks it stale.  With stall_remove a
 * stalled subflow is removed instead (stall_one()).
 */
static bool backup_wanted(struct gwsteer_connection const *conn,
                          struct gwsteer_subflow const *sf)
{
        return is_backup_for(conn, sf->gw)
                || (sf->stalled && !gwsteer->config->stall_remove
                    && other_subflow_flowing(conn, sf));
}

/**
 * @brief Make removals the kernel never confirmed eligible again.
 */
static void retry_unconfirmed(struct gwsteer_connection *conn, uint64_t now)
{
        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow *const sf = e->data;

                if (!sf->closing)
                        continue;

                // A removal the kernel never confirmed: ask again.
                if (now > removal_expiry(sf))
                        sf->closing = false;
                else
                        reconcile_after(removal_expiry(sf));
        }
}

/**
 * @brief Subflows of @a conn, live and requested, against max_subflows.
 */
static unsigned int subflow_count(struct gwsteer_connection const *conn)
{
        return live_subflows(conn)
                + (unsigned int) __builtin_popcount(conn->pending);
}

/**
 * @brief A subflow of @a conn on a backup gateway that @a gw may take
 *        the place of, or NULL.
 *
 * With max_subflows taken, a preferred gateway that recovers would wait
 * for a free place for ever, and the backup that stood in for it would
 * keep carrying its traffic. Only a backup gives way, and only to a
 * gateway that is none: displacing among preferred gateways whenever
 * their scores cross would churn subflows.
 */
static struct gwsteer_subflow *backup_to_displace(
        struct gwsteer_connection const *conn,
        struct gateway const *gw)
{
        struct gwsteer_subflow *victim = NULL;

        if (is_backup_for(conn, gw))
                return NULL;

        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow *const sf = e->data;
                struct gateway const *const other = current_gw(sf);

                if (other != NULL && !sf->closing
                    && is_backup_for(conn, other))
                        victim = sf;
        }

        return victim;
}

/**
 * @brief Make a client connection match the gateways' state.
 *
 * One subflow per up gateway that serves the peer (its address
 * family, and its peers prefixes if it has any), in preference
 * order, at most max_subflows in all (the initial subflow included);
 * none on down gateways (but never remove the last
 * subflow: with no subflow left the connection could not be
 * revived); backup flags as the health tracker wants them.
 */
static void reconcile_client(struct gwsteer_connection *conn)
{
        struct gwsteer_config const *const c = gwsteer->config;
        uint64_t const now = l_time_now();

        if (!conn->established)
                return;

        retry_unconfirmed(conn, now);
        choose_best(conn);

        /*
         * Subflows from a gateway's previous address: its new address
         * gets a subflow below, and the old one goes as soon as it is
         * not the connection's last (the kernel re-sends its data).
         */
        for (struct l_queue_entry const *s = l_queue_get_entries(conn->subflows);
             s;
             s = s->next) {
                struct gwsteer_subflow *const sf = s->data;

                if (sf->gw != NULL && current_gw(sf) == NULL && !sf->closing
                    && live_subflows(conn) > 1)
                        close_subflow(conn, sf,
                                      sf->gw->source.ss_family == AF_UNSPEC
                                      ? "gateway has no address"
                                      : "gateway address changed");
        }

        struct l_queue *const order = l_queue_new();

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(
                             gateway_health_gateways(gwsteer->health));
             e;
             e = e->next)
                l_queue_insert(order, e->data, preference_compare, conn);

        for (struct l_queue_entry const *e = l_queue_get_entries(order);
             e;
             e = e->next) {
                struct gateway *const gw = e->data;
                uint32_t const bit = 1u << gw->index;

                // A request that never produced a subflow: back off.
                if ((conn->pending & bit)
                    && now > request_expiry(conn, gw)) {
                        conn->pending &= ~bit;
                        back_off(conn, gw, "not up in time");
                }

                if (!gw->up) {
                        for (struct l_queue_entry const *s =
                                     l_queue_get_entries(conn->subflows);
                             s;
                             s = s->next) {
                                struct gwsteer_subflow *const sf = s->data;

                                if (sf->gw == gw && !sf->closing
                                    && live_subflows(conn) > 1)
                                        close_subflow(conn, sf,
                                                      "gateway down");
                        }
                        continue;
                }

                /*
                 * Only the gateways that reach this peer: its family,
                 * and of the gateways limited to some peers, those
                 * whose prefix matches longest (a tunnel's gateway
                 * for the proxy's address inside the tunnels).
                 */
                if (!(conn->served & bit))
                        continue;

                if (subflows_on(conn, gw) != 0)
                        continue;

                /*
                 * Not yet: the due timer holds one deadline, the
                 * earliest, and this run may have served another
                 * connection's.  Come back at this one's own time.
                 */
                if (conn->pending & bit) {
                        reconcile_after(request_expiry(conn, gw));
                        continue;
                }
                if (now < conn->retry_after_us[gw->index]) {
                        reconcile_at(conn->retry_after_us[gw->index]);
                        continue;
                }

                if (subflow_count(conn) >= c->max_subflows
                    && live_subflows(conn) > 1) {
                        struct gwsteer_subflow *const sf =
                                backup_to_displace(conn, gw);

                        if (sf != NULL)
                                close_subflow(conn, sf,
                                              "making room for a preferred "
                                              "gateway");
                }

                if (subflow_count(conn) < c->max_subflows)
                        open_subflow(conn, gw);
        }

        l_queue_destroy(order, NULL);

        // Backup flags follow configuration and preference.
        bool requested = false;

        for (struct l_queue_entry const *e = l_queue_get_entries(conn->subflows);
             e;
             e = e->next) {
                struct gwsteer_subflow *const sf = e->data;

                if (current_gw(sf) == NULL || sf->closing)
                        continue;

                bool const want = backup_wanted(conn, sf);
                if (sf->backup_known && want == sf->backup) {
                        sf->backup_requested = false;
                        continue;
                }

                // One request at a time; the kernel check confirms it.
                if (sf->backup_requested && sf->backup_wanted == want
                    && now - sf->backup_request_us
                       < (uint64_t) c->subflow_timeout_ms * 1000)
                        continue;

                int const err = mptcpd_pm_set_backup(
                        gwsteer->pm, conn->token,
                        (struct sockaddr *) &sf->laddr,
                        (struct sockaddr *) &sf->raddr, want);

                if (err != 0) {
                        l_error("token %08x: cannot set backup flag on "
                                "subflow via %s: %s", conn->token,
                                sf->gw->spec->id, strerror(err));
                        continue;
                }

                l_info("token %08x: backup flag %s on subflow via %s%s",
                       conn->token, want ? "set" : "cleared",
                       sf->gw->spec->id, sf->stalled ? " (stalled)" : "");
                sf->backup_requested = true;
                sf->backup_wanted = want;
                sf->backup_request_us = now;
                requested = true;
        }

        if (requested)
                schedule_backup_verify();
}

/**
 * @brief Make a proxy connection keep at most max_subflows subflows.
 *
 * Normally done when the kernel reports the join; this catches a
 * removal that could not be sent or that the kernel ignored.  The
 * newest subflows go first, the initial one never.
 */
static void reconcile_proxy(struct gwsteer_connection *conn)
{
        retry_unconfirmed(conn, l_time_now());

        while (live_subflows(conn) > gwsteer->config->max_subflows) {
                struct gwsteer_subflow *newest = NULL;

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(conn->subflows);
                     e;
                     e = e->next)
                        if (!((struct gwsteer_subflow *) e->data)->closing
                            && e != l_queue_get_entries(conn->subflows))
                                newest = e->data;

                if (newest == NULL)
                        break;

                close_subflow(conn, newest, "over max_subflows");
                if (!newest->closing)
                        break;  // Not sent: next maintenance run.
        }
}

/**
 * @brief l_hashmap_foreach() adapter for the role's reconcile.
 */
static void reconcile_one(void const *key, void *value, void *user_data)
{
        (void) key;
        (void) user_data;

        if (gwsteer->config->role == GWSTEER_ROLE_CLIENT)
                reconcile_client(value);
        else
                reconcile_proxy(value);
}

/**
 * @brief Reconcile every connection.
 */
static void reconcile_all(void)
{
        l_hashmap_foreach(gwsteer->connections, reconcile_one, NULL);
}

// ----------------------------------------------------------------
//                 Backup flags: what the kernel applied
// ----------------------------------------------------------------

/**
 * @brief kernel_subflows_walk() callback: note a subflow's backup flag.
 */
static void verify_one(struct kernel_subflow const *ksf, void *user_data)
{
        struct gwsteer_connection *const conn = find_connection(ksf->token);
        struct gwsteer_subflow *const sf = conn == NULL
                ? NULL
                : find_subflow(conn, (struct sockaddr const *) &ksf->laddr,
                               (struct sockaddr const *) &ksf->raddr);

        (void) user_data;

        if (sf == NULL)
                return;

        sf->backup_known = true;
        sf->backup = kernel_subflow_backup(ksf);
        if (sf->backup_requested && sf->backup == sf->backup_wanted)
                sf->backup_requested = false;
}

/**
 * @brief One-shot timer: read the backup flags back from the kernel.
 *
 * mptcpd does not tell the plugin whether the kernel accepted a
 * priority change, and the kernel sends no event for a local one, so
 * the flag counts as applied only once the kernel shows it.  A
 * refused request is sent again by the next reconcile after
 * subflow_timeout_ms.
 */
static void on_backup_verify(struct l_timeout *timeout, void *user_data)
{
        (void) user_data;

        l_timeout_remove(timeout);
        gwsteer->backup_verify = NULL;

        int const err = kernel_subflows_walk(verify_one, NULL);
        if (err != 0)
                l_error("cannot read subflow flags from the kernel: %s",
                        strerror(err));

        status_changed();
}

/**
 * @brief Check backup requests against the kernel soon.
 */
static void schedule_backup_verify(void)
{
        if (gwsteer->backup_verify == NULL)
                gwsteer->backup_verify =
                        l_timeout_create_ms(BACKUP_VERIFY_MS,
                                            on_backup_verify, NULL, NULL);
}

// ----------------------------------------------------------------
//          Stalled subflows: no new data where no ACK comes
// ----------------------------------------------------------------

/**
 * @brief kernel_subflows_walk() callback: one subflow's ACK progress.
 *
 * A subflow is stalled when it has had data outstanding and no ACK
 * for stall_ms and two of its smoothed RTTs, counted from the first
 * poll that saw it so (a lower bound: a subflow that was idle and
 * just sent is not stalled for an old last ACK).  A bulk subflow whose
 * gateway stopped forwarding gets there within stall_ms + one poll;
 * gateway detection (probes, fail_after) is not touched.
 */
static void stall_one(struct kernel_subflow const *ksf, void *user_data)
{
        bool *const changed = user_data;
        struct gwsteer_connection *const conn = find_connection(ksf->token);
        struct gwsteer_subflow *const sf = conn == NULL
                ? NULL
                : find_subflow(conn, (struct sockaddr const *) &ksf->laddr,
                               (struct sockaddr const *) &ksf->raddr);
        uint64_t const now = l_time_now();

        if (sf == NULL)
                return;

        verify_one(ksf, NULL);  // The backup flag the kernel holds.

        if (sf->gw == NULL || sf->closing || !ksf->has_tcp_info)
                return;

        bool stalled = false;

        if (ksf->unacked == 0) {
                sf->quiet_since_us = 0;
        } else {
                uint64_t const age = (uint64_t) ksf->last_ack_ms * 1000;
                uint64_t const ack_us = age < now ? now - age : 0;
                unsigned int const rtts_ms = ksf->rtt_us / 500;
                unsigned int const limit_ms =
                        gwsteer->config->stall_ms > rtts_ms
                        ? gwsteer->config->stall_ms : rtts_ms;

                // An ACK since the last look: start watching again.
                if (sf->quiet_since_us == 0
                    || ack_us > sf->quiet_since_us + STALL_ACK_SLACK_US)
                        sf->quiet_since_us = now;

                stalled = now - sf->quiet_since_us
                        >= (uint64_t) limit_ms * 1000;
        }

        if (stalled != sf->stalled) {
                sf->stalled = stalled;
                *changed = true;

                if (stalled)
                        l_info("token %08x: subflow via %s: %u segments "
                               "unacknowledged for %u ms: %s",
                               conn->token, sf->gw->spec->id, ksf->unacked,
                               ksf->last_ack_ms,
                               gwsteer->config->stall_remove
                               ? "removing it" : "no new data on it");
                else
                        l_info("token %08x: subflow via %s is acknowledged "
                               "again", conn->token, sf->gw->spec->id);
        }

        /*
         * stall_remove: the kernel re-sends a removed subflow's data
         * (with the rest of the connection's unacknowledged data) at
         * once; the gateway's state is still the probes' (no extra
         * probe: detection keeps its cadence).  A removal the kernel
         * did not confirm is asked for again here.
         */
        if (sf->stalled && gwsteer->config->stall_remove
            && other_subflow_flowing(conn, sf)) {
                delay_retry(conn, sf->gw, "stalled");
                close_subflow(conn, sf, "stalled");
                *changed = true;
        }
}

/**
 * @brief Periodic timer (client, stall_ms > 0): look for stalls.
 */
static void on_stall_poll(struct l_timeout *timeout, void *user_data)
{
        bool changed = false;

        (void) user_data;

        if (l_hashmap_size(gwsteer->connections) > 0) {
                int const err = kernel_subflows_walk(stall_one, &changed);

                if (err != 0)
                        l_debug("cannot read subflow state from the "
                                "kernel: %s", strerror(err));

                if (changed) {
                        reconcile_all();
                        status_changed();
                }
        }

        l_timeout_modify_ms(timeout, STALL_POLL_MS);
}

// ----------------------------------------------------------------
//                   Health changes and maintenance
// ----------------------------------------------------------------

/**
 * @brief l_hashmap_foreach() helper: forget back-off for gateways.
 */
static void clear_backoff(void const *key, void *value, void *user_data)
{
        struct gwsteer_connection *const conn = value;
        uint32_t const changed = L_PTR_TO_UINT(user_data);

        (void) key;

        for (unsigned int i = 0; i < GWSTEER_MAX_GATEWAYS; ++i) {
                if (!(changed & (1u << i)))
                        continue;

                conn->retry_after_us[i] = 0;
                conn->backoff_ms[i] = 0;

                /*
                 * A request made before the change was for the gateway
                 * as it was: from its old address if it moved, or
                 * through a gateway that went down.  Waiting
                 * subflow_timeout_ms for it would delay the subflow from
                 * the new address; a late answer is handled on arrival.
                 * One made since (a reconcile ran before this idle) is
                 * already for the new state: forgetting it would ask
                 * twice.
                 */
                if (conn->pending_since_us[i] <= gwsteer->changed_at_us[i])
                        conn->pending &= ~(1u << i);
        }
}

/**
 * @brief Idle callback: act on the health changes collected so far.
 */
static void on_health_idle(struct l_idle *idle, void *user_data)
{
        uint32_t const changed = gwsteer->changed_gateways;

        (void) user_data;

        l_idle_remove(idle);
        gwsteer->health_idle = NULL;
        gwsteer->changed_gateways = 0;

        if (changed != 0)
                l_hashmap_foreach(gwsteer->connections, clear_backoff,
                                  L_UINT_TO_PTR(changed));

        reconcile_all();
        // Gateway state is what readers poll for: publish it at once.
        write_status();
}

/**
 * @brief Health tracker callback: a gateway or the preference changed.
 *
 * Called from inside the tracker (a probe answer, a timeout, or a
 * probe sent by reconcile itself): acting here would re-enter the
 * plugin while it walks its lists.  The work runs from the event
 * loop instead, once per burst of changes.
 */
static void on_gateway_change(struct gateway *gw, void *user_data)
{
        (void) user_data;

        if (gw != NULL) {
                gwsteer->changed_gateways |= 1u << gw->index;
                gwsteer->changed_at_us[gw->index] = l_time_now();
        }

        if (gwsteer->health_idle == NULL)
                gwsteer->health_idle = l_idle_create(on_health_idle, NULL,
                                                     NULL);
}

/**
 * @brief Maintenance timer: retries, timeouts, fresh EWMAs on disk.
 */
static void on_maintenance(struct l_timeout *timeout, void *user_data)
{
        (void) user_data;

        settle_interfaces(NULL);
        reconcile_all();
        write_status();
        l_timeout_modify_ms(timeout, gwsteer->config->status_interval_ms);
}

// ----------------------------------------------------------------
//                     Proxy: announcements
// ----------------------------------------------------------------

/**
 * @brief Address ids a connection holds in the kernel, and the entries.
 */
struct held_ids
{
        /// Ids in use on the connection (bit = id).
        uint32_t used[256 / 32];

        /// The kernel's entries (struct kernel_addr *).
        struct l_queue *addrs;
};

/**
 * @brief kernel_addrs_walk() callback: note one address and its id.
 */
static void note_held(struct kernel_addr const *ka, void *user_data)
{
        struct held_ids *const held = user_data;

        held->used[ka->id / 32] |= 1u << (ka->id % 32);
        l_queue_push_tail(held->addrs, l_memdup(ka, sizeof(*ka)));
}

/**
 * @brief Address id for announcing @a sa on a connection holding @a held.
 *
 * The kernel keeps a connection's announced addresses for its life
 * and refuses an announcement whose id it holds for another address
 * or port ("did not match address and id"), so a connection picked up
 * after an mptcpd restart gets: the id the kernel holds for this very
 * address and port (the ADD_ADDR is sent again), else mptcpd's id if
 * the connection does not use it, else the next id it does not use.
 */
static mptcpd_aid_t choose_id(struct held_ids *held,
                              struct sockaddr const *sa,
                              mptcpd_aid_t preferred)
{
        mptcpd_aid_t id = 0;

        for (struct l_queue_entry const *e = l_queue_get_entries(held->addrs);
             e && id == 0;
             e = e->next) {
                struct kernel_addr const *const ka = e->data;

                if (sockaddr_port(sa) != 0
                    && same_endpoint((struct sockaddr const *) &ka->addr, sa))
                        id = ka->id;
        }

        for (unsigned int i = preferred; id == 0 && i < 256; ++i)
                if (i != 0 && !(held->used[i / 32] & (1u << (i % 32))))
                        id = (mptcpd_aid_t) i;

        for (unsigned int i = 1; id == 0 && i < preferred; ++i)
                if (!(held->used[i / 32] & (1u << (i % 32))))
                        id = (mptcpd_aid_t) i;

        if (id != 0)
                held->used[id / 32] |= 1u << (id % 32);

        return id;
}

/**
 * @brief Proxy: announce the configured extra addresses on @a conn.
 *
 * @a held is @c NULL for a new connection (mptcpd's address ids), or
 * the ids the kernel already holds for a connection that outlived a
 * previous mptcpd.
 */
static void announce_on(struct gwsteer_connection *conn,
                        struct held_ids *held)
{
        struct mptcpd_idm *const idm = mptcpd_pm_get_idm(gwsteer->pm);
        unsigned int i = 0;

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(gwsteer->announce);
             e;
             e = e->next, ++i) {
                struct gwsteer_announce *const a = e->data;
                struct sockaddr_storage addr = a->addr;
                struct sockaddr *const sa = (struct sockaddr *) &addr;
                char text[INET6_ADDRSTRLEN];

                if (sa->sa_family != conn->remote.ss_family)
                        continue;  // A v4 peer cannot join a v6 address.

                mptcpd_aid_t id = mptcpd_idm_get_id(idm, sa);

                if (held != NULL && id != 0)
                        id = choose_id(held, sa, id);

                int const err = id == 0
                        ? EINVAL
                        : mptcpd_pm_add_addr(gwsteer->pm, sa, id,
                                             conn->token);

                if (err != 0) {
                        l_error("token %08x: cannot announce %s (%d)",
                                conn->token, addr_text(sa, text, sizeof(text)),
                                err);
                        continue;
                }

                if (held != NULL)
                        l_info("token %08x: announcing %s port %u again "
                               "(id %u)", conn->token,
                               addr_text(sa, text, sizeof(text)),
                               ntohs(sockaddr_port(sa)), id);

                if (!a->listening) {
                        // mptcpd chose the port: keep this listener.
                        a->addr = addr;
                        a->listening = true;
                        l_info("announcing %s port %u on every connection",
                               addr_text(sa, text, sizeof(text)),
                               ntohs(sockaddr_port(sa)));
                } else {
                        conn->announced |= 1u << i;
                }
        }
}

/**
 * @brief Proxy: announce the configured extra addresses.
 */
static void announce_addresses(struct gwsteer_connection *conn)
{
        announce_on(conn, NULL);
}

/**
 * @brief Proxy: announce again on a connection a previous mptcpd served.
 *
 * Its announcements' listeners died with that mptcpd, and the kernel
 * accepts a join to a port other than the connection's own only if
 * that port was announced on the connection: without a new
 * announcement the peer could never join again (e.g. after a gateway
 * failover and restore).  The connection takes listener references
 * like a new one.  The old announcements stay: withdrawing them
 * (REMOVE_ADDR) would close the joins still using them.
 */
static void reannounce_addresses(struct gwsteer_connection *conn)
{
        struct held_ids held = { .addrs = l_queue_new() };
        int const err = kernel_addrs_walk(conn->token, note_held, &held);

        if (err != 0)
                l_error("token %08x: cannot list the kernel's addresses of "
                        "the connection, announcing with mptcpd's ids: %s",
                        conn->token, strerror(err));

        announce_on(conn, err == 0 ? &held : NULL);
        l_queue_destroy(held.addrs, l_free);
}

// ----------------------------------------------------------------
//                     Path manager event handlers
// ----------------------------------------------------------------

/**
 * @brief Is a connection on this side ours to manage?
 *
 * A client manages the connections it initiates, a proxy the ones it
 * accepted; anything else (e.g. a local service) is left alone.
 */
static bool is_managed(bool server_side)
{
        return server_side == (gwsteer->config->role == GWSTEER_ROLE_PROXY);
}

/**
 * @brief Start tracking a connection (replacing a stale one).
 */
static struct gwsteer_connection *track_connection(
        mptcpd_token_t token,
        struct sockaddr const *laddr,
        struct sockaddr const *raddr,
        struct kernel_subflow const *ksf)
{
        struct gwsteer_connection *const old =
                l_hashmap_remove(gwsteer->connections, L_UINT_TO_PTR(token));

        /*
         * A token is only unique among live connections: if it is
         * still tracked, its connection closed without us hearing of
         * it, and nothing of the old state applies to the new one.
         */
        if (old != NULL) {
                l_info("token %08x: reused, forgetting the old connection",
                       token);
                connection_destroy(old);
        }

        struct gwsteer_connection *const conn =
                l_new(struct gwsteer_connection, 1);

        conn->token = token;
        conn->subflows = l_queue_new();
        copy_sockaddr(&conn->remote, raddr);
        conn->served = gwsteer_gateways_serving(gwsteer->config, raddr);
        add_tracked_subflow(conn, laddr, raddr, ksf);

        l_hashmap_insert(gwsteer->connections, L_UINT_TO_PTR(token), conn);
        status_changed();

        return conn;
}

/**
 * @brief New MPTCP connection: start tracking it.
 */
static void gwsteer_new_connection(mptcpd_token_t token,
                                   struct sockaddr const *laddr,
                                   struct sockaddr const *raddr,
                                   bool server_side,
                                   struct mptcpd_pm *pm)
{
        (void) pm;

        if (!is_managed(server_side))
                return;

        track_connection(token, laddr, raddr, NULL);
        l_debug("token %08x: new connection", token);
}

/**
 * @brief Connection established: open the gateways' subflows.
 */
static void gwsteer_connection_established(mptcpd_token_t token,
                                           struct sockaddr const *laddr,
                                           struct sockaddr const *raddr,
                                           bool server_side,
                                           struct mptcpd_pm *pm)
{
        (void) pm;

        if (!is_managed(server_side))
                return;

        struct gwsteer_connection *conn = find_connection(token);

        if (conn == NULL)  // Missed the creation event: adopt.
                conn = track_connection(token, laddr, raddr, NULL);

        conn->established = true;

        if (gwsteer->config->role == GWSTEER_ROLE_CLIENT)
                reconcile_client(conn);
        else
                announce_addresses(conn);
}

/**
 * @brief Connection closed: forget it.
 */
static void gwsteer_connection_closed(mptcpd_token_t token,
                                      struct mptcpd_pm *pm)
{
        (void) pm;

        struct gwsteer_connection *const conn =
                l_hashmap_remove(gwsteer->connections, L_UINT_TO_PTR(token));

        if (conn == NULL)
                return;

        l_debug("token %08x: closed", token);
        connection_destroy(conn);
        status_changed();
}

/**
 * @brief Peer announced an address.
 *
 * Clients steer by local source address, one subflow per gateway to
 * the proxy's main address; extra proxy addresses would multiply
 * subflows without adding a gateway, so they are only logged.
 */
static void gwsteer_new_address(mptcpd_token_t token,
                                mptcpd_aid_t id,
                                struct sockaddr const *addr,
                                struct mptcpd_pm *pm)
{
        char a[INET6_ADDRSTRLEN];

        (void) pm;

        l_debug("token %08x: peer announced %s (id %u)", token,
                addr_text(addr, a, sizeof(a)), id);
}

/**
 * @brief New subflow reported by the kernel.
 */
static void gwsteer_new_subflow(mptcpd_token_t token,
                                struct sockaddr const *laddr,
                                struct sockaddr const *raddr,
                                bool backup,
                                struct mptcpd_pm *pm)
{
        (void) backup;
        (void) pm;

        struct gwsteer_connection *const conn = find_connection(token);

        if (conn == NULL || find_subflow(conn, laddr, raddr) != NULL)
                return;

        // The backup argument is not the kernel's flag (see backup_known).
        struct gwsteer_subflow *const sf =
                add_tracked_subflow(conn, laddr, raddr, NULL);

        status_changed();

        if (gwsteer->config->role == GWSTEER_ROLE_PROXY) {
                /*
                 * The kernel's userspace PM accepts every join while
                 * mptcpd runs: enforce the limit, which counts the
                 * initial subflow, by closing the newcomer.
                 */
                if (live_subflows(conn) > gwsteer->config->max_subflows)
                        close_subflow(conn, sf, "over max_subflows");
                return;
        }

        if (sf->gw == NULL) {
                /*
                 * The kernel's userspace PM opens no joins by itself: a
                 * client's join is one we asked for, and one from no
                 * gateway's address was asked for from the address its
                 * gateway has since left (DHCP renew, RA).
                 */
                if (live_subflows(conn) > 1)
                        close_subflow(conn, sf, "not from a gateway's "
                                      "current address");
                return;
        }

        conn->pending &= ~(1u << sf->gw->index);

        if (!sf->gw->up)
                close_subflow(conn, sf, "gateway went down meanwhile");
        else if (subflows_on(conn, sf->gw) > 1)
                close_subflow(conn, sf, "duplicate for this gateway");
        else if (live_subflows(conn) > gwsteer->config->max_subflows)
                close_subflow(conn, sf, "over max_subflows");
        else
                reconcile_client(conn);  // Applies the backup flag.
}

/**
 * @brief Subflow closed by the kernel or the peer.
 */
static void gwsteer_subflow_closed(mptcpd_token_t token,
                                   struct sockaddr const *laddr,
                                   struct sockaddr const *raddr,
                                   bool backup,
                                   struct mptcpd_pm *pm)
{
        (void) backup;
        (void) pm;

        struct gwsteer_connection *const conn = find_connection(token);

        if (conn == NULL)
                return;

        struct gateway *const gw = gateway_health_find(gwsteer->health,
                                                       laddr);
        struct gwsteer_subflow *const sf = find_subflow(conn, laddr, raddr);

        bool const was_pending =
                gw != NULL && (conn->pending & (1u << gw->index));

        if (gw != NULL)
                conn->pending &= ~(1u << gw->index);

        /*
         * A subflow we did not close (reset, timeout, refused or failed
         * join) is a hint that its gateway may be failing: probe it
         * now, and back off before opening another one.  Subflows we
         * asked to close are marked closing and land nowhere here.
         */
        if (gw != NULL && gwsteer->config->role == GWSTEER_ROLE_CLIENT
            && ((sf != NULL && !sf->closing) || (sf == NULL && was_pending)))
                subflow_failed(conn, gw, sf);

        if (sf != NULL) {
                l_queue_remove(conn->subflows, sf);
                l_free(sf);
                status_changed();
        }
}

/**
 * @brief Subflow priority changed (e.g. by the peer): remember it.
 */
static void gwsteer_subflow_priority(mptcpd_token_t token,
                                     struct sockaddr const *laddr,
                                     struct sockaddr const *raddr,
                                     bool backup,
                                     struct mptcpd_pm *pm)
{
        (void) pm;
        (void) backup;

        struct gwsteer_connection *const conn = find_connection(token);
        struct gwsteer_subflow *const sf =
                conn ? find_subflow(conn, laddr, raddr) : NULL;

        /*
         * The event carries the peer's flag, not ours (which is what
         * gwsteer manages): check ours with the kernel.
         */
        if (sf != NULL)
                schedule_backup_verify();
}

// ----------------------------------------------------------------
//          Gateways that follow an interface (DHCP, RA, hotplug)
// ----------------------------------------------------------------

/**
 * @brief Can @a sa be the source of gateway @a spec?
 *
 * Of the gateway's family, and the configured source if it names one;
 * otherwise not a link-local or loopback address (no route to the
 * peer leaves from those: IPv6 link-local addresses come before RA's
 * global one, 169.254/16 is what is left without a DHCP lease).
 */
static bool usable_address(struct gateway_spec const *spec,
                           struct sockaddr const *sa)
{
        if (sa->sa_family != spec->family)
                return false;

        if (spec->source.ss_family != AF_UNSPEC)
                return gwsteer_same_ip(sa, (struct sockaddr const *)
                                       &spec->source);

        if (sa->sa_family == AF_INET6) {
                struct in6_addr const *const a =
                        &((struct sockaddr_in6 const *) sa)->sin6_addr;

                return !IN6_IS_ADDR_LINKLOCAL(a) && !IN6_IS_ADDR_LOOPBACK(a)
                        && !IN6_IS_ADDR_MULTICAST(a)
                        && !IN6_IS_ADDR_UNSPECIFIED(a);
        }

        uint32_t const a =
                ntohl(((struct sockaddr_in const *) sa)->sin_addr.s_addr);

        return (a >> 16) != 0xa9fe && (a >> 24) != 127 && a != 0;
}

/**
 * @brief The kernel's flags of IPv6 address @a a (IFA_F_*), or 0 if it
 *        is not listed.
 *
 * From /proc/net/if_inet6 (this network namespace's): getifaddrs() does
 * not say whether an address is still tentative (duplicate address
 * detection running), failed it, is deprecated (its preferred lifetime
 * is over) or is a temporary, privacy address that changes daily.
 */
static unsigned int ipv6_flags(struct in6_addr const *a)
{
        FILE *const f = fopen("/proc/net/if_inet6", "re");
        char hex[33];
        unsigned int flags;
        unsigned int found = 0;

        if (f == NULL)
                return 0;

        while (fscanf(f, "%32s %*x %*x %*x %x %*s", hex, &flags) == 2) {
                struct in6_addr b;
                bool ok = strlen(hex) == 32;

                for (int i = 0; ok && i < 16; ++i) {
                        unsigned int byte;

                        ok = sscanf(hex + 2 * i, "%2x", &byte) == 1;
                        b.s6_addr[i] = (uint8_t) byte;
                }

                if (ok && memcmp(&b, a, sizeof(b)) == 0) {
                        found = flags;
                        break;
                }
        }

        fclose(f);
        return found;
}

/// How good a source an interface's address is for its gateway.
enum source_rank {
        SOURCE_UNUSABLE,        ///< Not the gateway's, or not yet usable.
        SOURCE_DEPRECATED,      ///< Still valid, for new use only if no other.
        SOURCE_FALLBACK,        ///< IPv6 unique local or temporary.
        SOURCE_GOOD,
};

/**
 * @brief Rank @a sa as the source of gateway @a spec.
 *
 * An IPv6 address that is tentative or failed duplicate address
 * detection is not taken; a deprecated one (its preferred lifetime over,
 * still valid) only when there is no other; a unique local (fc00::/7)
 * or temporary one only when the interface has no global, stable one: a
 * LAN that advertises both a ULA and a global prefix would otherwise
 * send the gateway's probes to a global target from the ULA, and each
 * new temporary address would move its subflows.
 */
static enum source_rank source_rank(struct gateway_spec const *spec,
                                    struct sockaddr const *sa)
{
        if (!usable_address(spec, sa))
                return SOURCE_UNUSABLE;

        if (sa->sa_family != AF_INET6 || spec->source.ss_family != AF_UNSPEC)
                return SOURCE_GOOD;

        struct in6_addr const *const a =
                &((struct sockaddr_in6 const *) sa)->sin6_addr;
        unsigned int const flags = ipv6_flags(a);

        if (flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED))
                return SOURCE_UNUSABLE;

        if (flags & IFA_F_DEPRECATED)
                return SOURCE_DEPRECATED;

        if ((flags & IFA_F_TEMPORARY) || (a->s6_addr[0] & 0xfe) == 0xfc)
                return SOURCE_FALLBACK;

        return SOURCE_GOOD;
}

/**
 * @brief Is @a sa an address of interface @a name in @a list?
 */
static bool listed(struct ifaddrs const *list, char const *name,
                   struct sockaddr const *sa)
{
        for (struct ifaddrs const *a = list; a != NULL; a = a->ifa_next)
                if (a->ifa_addr != NULL && strcmp(a->ifa_name, name) == 0
                    && gwsteer_same_ip(a->ifa_addr, sa))
                        return true;

        return false;
}

/**
 * @brief Settle the source of gateway @a gw from the interfaces now.
 *
 * @param[in] gw      A gateway that follows an interface.
 * @param[in] list    The host's interfaces and addresses (getifaddrs()).
 * @param[in] added   An address mptcpd just reported added, or @c NULL.
 *
 * The best ranked address of the interface (source_rank()); among
 * equals a new address wins (a DHCP renew to a new address adds it
 * before the old one goes), then the current one while the interface
 * has it; none while the interface is absent or not up and running.
 */
static void settle_gateway(struct gateway *gw, struct ifaddrs const *list,
                           struct sockaddr const *added)
{
        struct gateway_spec const *const spec = gw->spec;
        struct sockaddr const *const current =
                (struct sockaddr const *) &gw->source;
        unsigned int const ready = IFF_UP | IFF_RUNNING;
        struct sockaddr const *next = NULL;
        bool up = false;

        for (struct ifaddrs const *a = list; a != NULL; a = a->ifa_next)
                if (strcmp(a->ifa_name, spec->interface) == 0)
                        up |= (a->ifa_flags & ready) == ready;

        enum source_rank best = SOURCE_UNUSABLE;
        enum source_rank rank;

        if (up && added != NULL && listed(list, spec->interface, added)
            && (rank = source_rank(spec, added)) > best) {
                best = rank;
                next = added;
        }

        if (up && current->sa_family != AF_UNSPEC
            && listed(list, spec->interface, current)
            && (rank = source_rank(spec, current)) > best) {
                best = rank;
                next = current;
        }

        for (struct ifaddrs const *a = list; up && a != NULL; a = a->ifa_next)
                if (a->ifa_addr != NULL
                    && strcmp(a->ifa_name, spec->interface) == 0
                    && (rank = source_rank(spec, a->ifa_addr)) > best) {
                        best = rank;
                        next = a->ifa_addr;
                }

        gw->ifindex = next != NULL ? (int) if_nametoindex(spec->interface) : 0;
        (void) gateway_health_set_source(gwsteer->health, gw, next);
}

/**
 * @brief Settle every gateway that follows an interface.
 *
 * mptcpd's network monitor says when to look, the kernel (getifaddrs())
 * what is there: mptcpd 0.12 tracks only interfaces that are up and
 * running, so it drops an interface's addresses when its link goes
 * down and never learns the addresses an interface got before its link
 * came up (a re-plugged modem, a veth configured before its peer).
 * Also run on every maintenance pass, as a safety net for a missed
 * event.
 *
 * @param[in] added An address mptcpd just reported added, or @c NULL.
 */
static void settle_interfaces(struct sockaddr const *added)
{
        struct ifaddrs *list = NULL;
        bool any = false;

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(
                             gateway_health_gateways(gwsteer->health));
             e;
             e = e->next)
                any |= ((struct gateway *) e->data)->spec->interface[0]
                        != '\0';

        if (!any)
                return;

        if (getifaddrs(&list) != 0) {
                l_error("gwsteer: cannot list interfaces: %s",
                        strerror(errno));
                return;
        }

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(
                             gateway_health_gateways(gwsteer->health));
             e;
             e = e->next) {
                struct gateway *const gw = e->data;

                if (gw->spec->interface[0] != '\0')
                        settle_gateway(gw, list, added);
        }

        freeifaddrs(list);
}

/**
 * @brief A network interface appeared (hotplug, or came up).
 */
static void gwsteer_new_interface(struct mptcpd_interface const *i,
                                  struct mptcpd_pm *pm)
{
        (void) i;
        (void) pm;

        settle_interfaces(NULL);
}

/**
 * @brief A network interface's flags changed (up, down, carrier).
 */
static void gwsteer_update_interface(struct mptcpd_interface const *i,
                                     struct mptcpd_pm *pm)
{
        (void) i;
        (void) pm;

        settle_interfaces(NULL);
}

/**
 * @brief A network interface went away (or down): its gateways go down
 *        at once.
 */
static void gwsteer_delete_interface(struct mptcpd_interface const *i,
                                     struct mptcpd_pm *pm)
{
        (void) i;
        (void) pm;

        settle_interfaces(NULL);
}

/**
 * @brief An address was added (DHCP lease, RA, static).
 */
static void gwsteer_new_local_address(struct mptcpd_interface const *i,
                                      struct sockaddr const *sa,
                                      struct mptcpd_pm *pm)
{
        (void) i;
        (void) pm;

        settle_interfaces(sa);
}

/**
 * @brief An address was removed (lease expired, renewed to another).
 */
static void gwsteer_delete_local_address(struct mptcpd_interface const *i,
                                         struct sockaddr const *sa,
                                         struct mptcpd_pm *pm)
{
        (void) i;
        (void) sa;
        (void) pm;

        settle_interfaces(NULL);
}

/// Path manager and network monitor event handlers.
static struct mptcpd_plugin_ops const pm_ops = {
        .new_connection         = gwsteer_new_connection,
        .connection_established = gwsteer_connection_established,
        .connection_closed      = gwsteer_connection_closed,
        .new_address            = gwsteer_new_address,
        .new_subflow            = gwsteer_new_subflow,
        .subflow_closed         = gwsteer_subflow_closed,
        .subflow_priority       = gwsteer_subflow_priority,
        .new_interface          = gwsteer_new_interface,
        .update_interface       = gwsteer_update_interface,
        .delete_interface       = gwsteer_delete_interface,
        .new_local_address      = gwsteer_new_local_address,
        .delete_local_address   = gwsteer_delete_local_address,
};

// ----------------------------------------------------------------
//            Start-up: connections that outlived mptcpd
// ----------------------------------------------------------------

/**
 * @brief kernel_subflows_walk() callback, pass 1: initial subflows.
 */
static void adopt_initial(struct kernel_subflow const *ksf, void *user_data)
{
        bool const initial = gwsteer->config->role == GWSTEER_ROLE_CLIENT
                ? kernel_subflow_initial_client(ksf)
                : kernel_subflow_initial_server(ksf);
        unsigned int *const adopted = user_data;

        if (!initial || find_connection(ksf->token) != NULL)
                return;

        // Through mptcpd, so that its later events reach us too.
        mptcpd_plugin_new_connection(GWSTEER_PLUGIN_NAME, ksf->token,
                                     (struct sockaddr const *) &ksf->laddr,
                                     (struct sockaddr const *) &ksf->raddr,
                                     gwsteer->config->role
                                     == GWSTEER_ROLE_PROXY,
                                     gwsteer->pm);

        struct gwsteer_connection *const conn = find_connection(ksf->token);

        if (conn == NULL)
                return;

        conn->established = true;
        ++*adopted;

        if (gwsteer->config->role == GWSTEER_ROLE_PROXY)
                reannounce_addresses(conn);
}

/**
 * @brief kernel_subflows_walk() callback, pass 2: joined subflows.
 */
static void adopt_join(struct kernel_subflow const *ksf, void *user_data)
{
        struct gwsteer_connection *const conn = find_connection(ksf->token);
        struct sockaddr const *const l = (struct sockaddr const *) &ksf->laddr;
        struct sockaddr const *const r = (struct sockaddr const *) &ksf->raddr;

        (void) user_data;

        if (conn != NULL && find_subflow(conn, l, r) == NULL)
                add_tracked_subflow(conn, l, r, ksf);
}

/**
 * @brief Pick up connections that exist already (mptcpd restarted).
 *
 * mptcpd reports only new events, so without this the connections of
 * a previous mptcpd would never be steered again.  They are adopted
 * established, with the subflows and backup flags the kernel shows,
 * and reconciled like any other (the first maintenance run and every
 * health change).  On the proxy the announcements are made again
 * (reannounce_addresses()): a previous mptcpd's listeners died with
 * it.
 */
static void adopt_existing(struct l_idle *idle, void *user_data)
{
        (void) user_data;

        l_idle_remove(idle);
        gwsteer->adopt_idle = NULL;

        settle_interfaces(NULL);

        unsigned int adopted = 0;
        int err = kernel_subflows_walk(adopt_initial, &adopted);

        if (err == 0)
                err = kernel_subflows_walk(adopt_join, NULL);

        if (err != 0)
                l_error("gwsteer: cannot list existing MPTCP connections: %s",
                        strerror(err));

        if (adopted > 0) {
                l_info("gwsteer: picked up %u existing connection%s",
                       adopted, adopted == 1 ? "" : "s");
                reconcile_all();
                status_changed();
        }
}

// ----------------------------------------------------------------
//                          Plugin life
// ----------------------------------------------------------------

/**
 * @brief Free everything the plugin owns.
 */
static void gwsteer_state_free(struct gwsteer_state *s)
{
        if (s == NULL)
                return;

        l_timeout_remove(s->maintenance);
        l_timeout_remove(s->status_write);
        l_timeout_remove(s->backup_verify);
        l_timeout_remove(s->stall_poll);
        l_timeout_remove(s->due);
        l_idle_remove(s->health_idle);
        l_idle_remove(s->adopt_idle);
        l_hashmap_destroy(s->connections, connection_destroy);
        l_queue_destroy(s->announce, l_free);
        gateway_health_destroy(s->health);
        gwsteer_config_free(s->config);
        l_free(s);
}

/**
 * @brief Plugin init: load the configuration, start probing.
 */
static int gwsteer_init(struct mptcpd_pm *pm)
{
        char const *path = getenv(GWSTEER_CONFIG_ENV);

        if (path == NULL || *path == '\0')
                path = GWSTEER_DEFAULT_CONFIG_PATH;

        struct gwsteer_config *const config = gwsteer_config_load(path);
        if (config == NULL) {
                l_error("gwsteer: not started, fix %s", path);
                return -1;
        }

        gwsteer = l_new(struct gwsteer_state, 1);
        gwsteer->config = config;
        gwsteer->pm = pm;
        gwsteer->connections = l_hashmap_new();
        gwsteer->announce = l_queue_new();

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(config->announce);
             e;
             e = e->next) {
                struct gwsteer_announce *const a =
                        l_new(struct gwsteer_announce, 1);

                a->addr = *(struct sockaddr_storage const *) e->data;
                l_queue_push_tail(gwsteer->announce, a);
        }

        gwsteer->health = gateway_health_new(config, on_gateway_change, NULL);

        if (!mptcpd_plugin_register_ops(GWSTEER_PLUGIN_NAME, &pm_ops)) {
                l_error("gwsteer: failed to register path manager ops");
                gwsteer_state_free(gwsteer);
                gwsteer = NULL;
                return -1;
        }

        /*
         * mptcpd maps connections to plugins only after every plugin's
         * init returned: pick up existing connections from the loop.
         */
        gwsteer->adopt_idle = l_idle_create(adopt_existing, NULL, NULL);

        gwsteer->maintenance = l_timeout_create_ms(config->status_interval_ms,
                                                   on_maintenance, NULL,
                                                   NULL);

        if (config->role == GWSTEER_ROLE_CLIENT && config->stall_ms > 0)
                gwsteer->stall_poll = l_timeout_create_ms(STALL_POLL_MS,
                                                          on_stall_poll,
                                                          NULL, NULL);
        write_status();

        l_info("gwsteer: %s role, %u gateways, config %s, status %s",
               config->role == GWSTEER_ROLE_CLIENT ? "client" : "proxy",
               l_queue_length(config->gateways), path, config->status_file);

        return 0;
}

/**
 * @brief Plugin exit: stop probing, free all state.
 */
static void gwsteer_exit(struct mptcpd_pm *pm)
{
        (void) pm;

        gwsteer_state_free(gwsteer);
        gwsteer = NULL;

        l_info("gwsteer: exited");
}

MPTCPD_PLUGIN_DEFINE(gwsteer,
                     "braid gateway-steering path manager",
                     MPTCPD_PLUGIN_PRIORITY_DEFAULT,
                     gwsteer_init,
                     gwsteer_exit)
