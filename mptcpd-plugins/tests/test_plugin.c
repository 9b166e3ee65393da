// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file test_plugin.c
 *
 * @brief Unit tests of gwsteer.c's bookkeeping, driven through its
 *        mptcpd plugin operations.
 *
 * The plugin is linked with this file instead of libmptcpd, the ICMP
 * prober and the sock_diag reader: the mptcpd commands it issues are
 * recorded (and can be made to fail), probe answers and the kernel's
 * subflow list are whatever a test says.  The health tracker, the
 * configuration loader and the status file are the real ones, and
 * time is real (short intervals), so timers and back-off run as in
 * mptcpd.  What the kernel does is checked by the namespace tests;
 * these check what the plugin decides and remembers.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ell/ell.h>

#include <mptcpd/network_monitor.h>
#include <mptcpd/path_manager.h>
#include <mptcpd/plugin.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "gateway_probe.h"
#include "kernel_subflows.h"

/// Number of failed checks.
static int failures;

/// Record a failed check with its location.
#define CHECK(cond)                                                     \
        do {                                                            \
                if (!(cond)) {                                          \
                        fprintf(stderr, "%s:%d: CHECK failed: %s\n",    \
                                __FILE__, __LINE__, #cond);             \
                        ++failures;                                     \
                }                                                       \
        } while (0)

/// The plugin under test (MPTCPD_PLUGIN_DEFINE in gwsteer.c).
extern struct mptcpd_plugin_desc const _mptcpd_plugin;

// ----------------------------------------------------------------
//                 Fake mptcpd: recorded commands
// ----------------------------------------------------------------

/// Kinds of recorded commands.
enum cmd_kind { CMD_ADD_SUBFLOW, CMD_REMOVE_SUBFLOW, CMD_SET_BACKUP,
                CMD_ADD_ADDR, CMD_LM_CLOSE, CMD_KINDS };

/// One recorded command.
struct cmd
{
        enum cmd_kind kind;
        uint32_t token;
        char local[INET6_ADDRSTRLEN];
        char remote[INET6_ADDRSTRLEN];
        bool flag;
        unsigned int id;
        int64_t at_ms;
};

/// Recorded commands, in order.
static struct cmd cmds[4096];

/// Number of recorded commands.
static size_t ncmds;

/// Errors the next commands of a kind return (0: success).
static int fail_next[CMD_KINDS];

/// Operations the plugin registered.
static struct mptcpd_plugin_ops const *ops;

/// Tokens handed to mptcpd_plugin_new_connection().
static unsigned int plugin_new_connections;

/// A stand-in for mptcpd's path manager object.
static char fake_pm_storage;

/// The path manager pointer the plugin is given.
#define PM ((struct mptcpd_pm *) &fake_pm_storage)

/// Start of the test, for command time stamps.
static uint64_t t0_us;

/// Milliseconds since start(): when a command was recorded (cmd.at_ms).
static int64_t now_ms(void)
{
        return (int64_t) (l_time_now() - t0_us) / 1000;
}

/**
 * @brief Format the IP of @a sa (or "-").
 */
static void ip_text(struct sockaddr const *sa, char *buf, size_t len)
{
        if (sa == NULL)
                snprintf(buf, len, "-");
        else
                gwsteer_ntop(sa, buf, len);
}

/**
 * @brief Record a command; return the error a test asked for.
 */
static int record(enum cmd_kind kind, uint32_t token,
                  struct sockaddr const *l, struct sockaddr const *r,
                  bool flag)
{
        if (ncmds < L_ARRAY_SIZE(cmds)) {
                struct cmd *const c = &cmds[ncmds++];

                c->kind = kind;
                c->token = token;
                ip_text(l, c->local, sizeof(c->local));
                ip_text(r, c->remote, sizeof(c->remote));
                c->flag = flag;
                c->at_ms = now_ms();
        }

        int const err = fail_next[kind];
        fail_next[kind] = 0;
        return err;
}

int mptcpd_pm_add_subflow(struct mptcpd_pm *pm, mptcpd_token_t token,
                          mptcpd_aid_t local_address_id,
                          mptcpd_aid_t remote_address_id,
                          struct sockaddr const *local_addr,
                          struct sockaddr const *remote_addr, bool backup)
{
        (void) pm;
        (void) local_address_id;
        (void) remote_address_id;
        return record(CMD_ADD_SUBFLOW, token, local_addr, remote_addr,
                      backup);
}

int mptcpd_pm_remove_subflow(struct mptcpd_pm *pm, mptcpd_token_t token,
                             struct sockaddr const *local_addr,
                             struct sockaddr const *remote_addr)
{
        (void) pm;
        return record(CMD_REMOVE_SUBFLOW, token, local_addr, remote_addr,
                      false);
}

int mptcpd_pm_set_backup(struct mptcpd_pm *pm, mptcpd_token_t token,
                         struct sockaddr const *local_addr,
                         struct sockaddr const *remote_addr, bool backup)
{
        (void) pm;
        return record(CMD_SET_BACKUP, token, local_addr, remote_addr, backup);
}

/// Port the fake listener manager hands out for port-0 announcements.
#define ANNOUNCE_PORT 40000

int mptcpd_pm_add_addr(struct mptcpd_pm *pm, struct sockaddr *addr,
                       mptcpd_aid_t id, mptcpd_token_t token)
{
        (void) pm;

        struct sockaddr_in *const in = (struct sockaddr_in *) addr;

        if (in->sin_port == 0)
                in->sin_port = htons(ANNOUNCE_PORT);

        size_t const at = ncmds;
        int const err = record(CMD_ADD_ADDR, token, addr, NULL,
                               ntohs(in->sin_port) == ANNOUNCE_PORT);

        if (at < ncmds)
                cmds[at].id = id;

        return err;
}

int mptcpd_lm_close(struct mptcpd_lm *lm, struct sockaddr const *sa)
{
        (void) lm;
        return record(CMD_LM_CLOSE, 0, sa, NULL, false);
}

struct mptcpd_idm *mptcpd_pm_get_idm(struct mptcpd_pm const *pm)
{
        (void) pm;
        return (struct mptcpd_idm *) &fake_pm_storage;
}

struct mptcpd_lm *mptcpd_pm_get_lm(struct mptcpd_pm const *pm)
{
        (void) pm;
        return (struct mptcpd_lm *) &fake_pm_storage;
}

mptcpd_aid_t mptcpd_idm_get_id(struct mptcpd_idm *idm,
                               struct sockaddr const *sa)
{
        (void) idm;
        // Any stable non-zero id per address will do.
        return (mptcpd_aid_t) (1 + (((struct sockaddr_in const *) sa)
                                    ->sin_addr.s_addr >> 24) % 200);
}

bool mptcpd_plugin_register_ops(char const *name,
                                struct mptcpd_plugin_ops const *o)
{
        (void) name;
        ops = o;
        return true;
}

void mptcpd_plugin_new_connection(char const *name, mptcpd_token_t token,
                                  struct sockaddr const *laddr,
                                  struct sockaddr const *raddr,
                                  bool server_side, struct mptcpd_pm *pm)
{
        (void) name;
        ++plugin_new_connections;
        ops->new_connection(token, laddr, raddr, server_side, pm);
}

// ----------------------------------------------------------------
//      Fake network monitor and kernel: interfaces by hand
// ----------------------------------------------------------------

/// The interfaces mptcpd's network monitor "sees".
static struct mptcpd_interface fake_ifs[2];

/// Number of entries in @c fake_ifs.
static size_t nfake_ifs;

/**
 * @brief The kernel's view for the plugin: getifaddrs() over fake_ifs.
 *
 * Defined here, it takes the place of the C library's for gwsteer.c.
 */
int getifaddrs(struct ifaddrs **out)
{
        struct ifaddrs *head = NULL;

        for (size_t i = nfake_ifs; i-- > 0;) {
                struct mptcpd_interface *const f = &fake_ifs[i];

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(f->addrs);
                     e;
                     e = e->next) {
                        struct ifaddrs *const a = l_new(struct ifaddrs, 1);

                        a->ifa_name = f->name;
                        a->ifa_flags = f->flags;
                        a->ifa_addr = e->data;
                        a->ifa_next = head;
                        head = a;
                }

                // The link itself (AF_PACKET in the real list): no address.
                struct ifaddrs *const link = l_new(struct ifaddrs, 1);

                link->ifa_name = f->name;
                link->ifa_flags = f->flags;
                link->ifa_next = head;
                head = link;
        }

        *out = head;
        return 0;
}

void freeifaddrs(struct ifaddrs *list)
{
        while (list != NULL) {
                struct ifaddrs *const next = list->ifa_next;

                l_free(list);
                list = next;
        }
}

/**
 * @brief Give fake interface @a i the address @a ip.
 */
static struct sockaddr *fake_if_add(struct mptcpd_interface *i,
                                    char const *ip)
{
        struct sockaddr_storage *const ss = l_new(struct sockaddr_storage, 1);

        gwsteer_parse_addr(ip, ss);
        l_queue_push_tail(i->addrs, ss);
        return (struct sockaddr *) ss;
}

/**
 * @brief l_queue_remove_if() match: the same IP.
 */
static bool same_ip_match(void const *a, void const *b)
{
        return gwsteer_same_ip(a, b);
}

/**
 * @brief Number of recorded commands of @a kind with @a local (or any).
 */
static unsigned int count(enum cmd_kind kind, char const *local)
{
        unsigned int n = 0;

        for (size_t i = 0; i < ncmds; ++i)
                n += cmds[i].kind == kind
                        && (local == NULL
                            || strcmp(cmds[i].local, local) == 0);

        return n;
}

// ----------------------------------------------------------------
//              Fake prober: answers when told to
// ----------------------------------------------------------------

/**
 * @struct gateway_probe
 *
 * @brief Fake prober: remembers the last sequence number sent.
 */
struct gateway_probe
{
        gateway_probe_reply_cb on_reply;
        void *user_data;
        bool answering;
        unsigned int reply_delay_ms;
        struct sockaddr_storage source;
};

/// Every fake prober, to answer or silence them by source.
static struct gateway_probe *probes[8];

struct gateway_probe *gateway_probe_new(struct sockaddr const *source,
                                        struct sockaddr const *target,
                                        uint16_t ident,
                                        gateway_probe_reply_cb on_reply,
                                        void *user_data)
{
        struct gateway_probe *const p = l_new(struct gateway_probe, 1);

        (void) target;
        (void) ident;
        p->on_reply = on_reply;
        p->user_data = user_data;
        p->answering = true;
        memcpy(&p->source, source, source->sa_family == AF_INET
               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));

        for (size_t i = 0; i < L_ARRAY_SIZE(probes); ++i)
                if (probes[i] == NULL) {
                        probes[i] = p;
                        break;
                }

        return p;
}

/// Replies not delivered yet: (prober, sequence, when sent).
static struct {
        struct gateway_probe *p;
        uint16_t seq;
        uint64_t sent_us;
} replies[256];

/// Number of undelivered replies.
static size_t nreplies;

void gateway_probe_set_source(struct gateway_probe *p,
                              struct sockaddr const *source)
{
        memset(&p->source, 0, sizeof(p->source));
        if (source != NULL)
                memcpy(&p->source, source, source->sa_family == AF_INET
                       ? sizeof(struct sockaddr_in)
                       : sizeof(struct sockaddr_in6));
}

bool gateway_probe_send(struct gateway_probe *p, uint16_t seq)
{
        if (p->source.ss_family == AF_UNSPEC)
                return false;

        if (p->answering && nreplies < L_ARRAY_SIZE(replies)) {
                replies[nreplies].p = p;
                replies[nreplies].seq = seq;
                replies[nreplies].sent_us = l_time_now();
                ++nreplies;
        }

        return true;
}

void gateway_probe_destroy(struct gateway_probe *p)
{
        for (size_t i = 0; i < L_ARRAY_SIZE(probes); ++i)
                if (probes[i] == p)
                        probes[i] = NULL;

        for (size_t i = 0; i < nreplies; ++i)
                if (replies[i].p == p)
                        replies[i].p = NULL;

        l_free(p);
}

/**
 * @brief Is @a p a prober from @a source?
 */
static bool probes_from(struct gateway_probe const *p, char const *source)
{
        struct sockaddr_storage ss;

        return p != NULL && gwsteer_parse_addr(source, &ss)
                && gwsteer_same_ip((struct sockaddr const *) &p->source,
                                   (struct sockaddr *) &ss);
}

/// Source whose prober answers first in every round, or @c NULL.
static char const *fastest_source;

/**
 * @brief Is @a p the prober of fastest_source?
 */
static bool is_fastest(struct gateway_probe const *p)
{
        return fastest_source != NULL && probes_from(p, fastest_source);
}

/**
 * @brief Deliver every pending probe answer that is due (like the socket
 *        would).
 *
 * In the order sent (file order), but fastest_source's first; a prober
 * with a reply delay answers that long after its probe.
 */
static void deliver_replies(void)
{
        size_t const n = nreplies;
        uint64_t const now = l_time_now();

        for (int pass = 0; pass < 2; ++pass)
                for (size_t i = 0; i < n; ++i) {
                        struct gateway_probe *const p = replies[i].p;

                        if (p == NULL || is_fastest(p) != (pass == 0)
                            || now - replies[i].sent_us
                               < (uint64_t) p->reply_delay_ms * 1000)
                                continue;

                        replies[i].p = NULL;
                        p->on_reply(replies[i].seq, p->user_data);
                }

        // Keep the replies not due yet, and any sent by the callbacks.
        size_t kept = 0;

        for (size_t i = 0; i < nreplies; ++i)
                if (replies[i].p != NULL)
                        replies[kept++] = replies[i];
        nreplies = kept;
}

/**
 * @brief Make the probers of @a source answer or stay silent.
 */
static void set_answering(char const *source, bool answering)
{
        for (size_t i = 0; i < L_ARRAY_SIZE(probes); ++i)
                if (probes_from(probes[i], source))
                        probes[i]->answering = answering;
}

/**
 * @brief Make the probers of @a source answer @a ms after each probe.
 */
static void set_reply_delay(char const *source, unsigned int ms)
{
        for (size_t i = 0; i < L_ARRAY_SIZE(probes); ++i)
                if (probes_from(probes[i], source))
                        probes[i]->reply_delay_ms = ms;
}

// ----------------------------------------------------------------
//              Fake sock_diag: the kernel's subflow list
// ----------------------------------------------------------------

/// What the "kernel" shows.
static struct kernel_subflow kernel[16];

/// Number of entries in @c kernel.
static size_t nkernel;

/// Per entry: time of its last ACK (monotonic us), or 0: last_ack_ms as set.
static uint64_t kernel_ack_at_us[16];

int kernel_subflows_walk(kernel_subflow_cb cb, void *user_data)
{
        for (size_t i = 0; i < nkernel; ++i) {
                if (kernel_ack_at_us[i] != 0)
                        kernel[i].last_ack_ms = (uint32_t)
                                ((l_time_now() - kernel_ack_at_us[i]) / 1000);
                cb(&kernel[i], user_data);
        }

        return 0;
}

/// Local addresses the "kernel" holds per connection (userspace PM).
static struct { uint32_t token; struct kernel_addr a; } kaddrs[8];

/// Number of entries in @c kaddrs.
static size_t nkaddrs;

int kernel_addrs_walk(uint32_t token, kernel_addr_cb cb, void *user_data)
{
        for (size_t i = 0; i < nkaddrs; ++i)
                if (kaddrs[i].token == token)
                        cb(&kaddrs[i].a, user_data);

        return 0;
}

/// Flag bits of the fake kernel list (as in linux/mptcp.h).
enum { F_MCAP_LOC = 1 << 1, F_JOIN_LOC = 1 << 3, F_BKUP_LOC = 1 << 5 };

bool kernel_subflow_backup(struct kernel_subflow const *sf)
{
        return sf->flags & F_BKUP_LOC;
}

bool kernel_subflow_initial_client(struct kernel_subflow const *sf)
{
        return sf->flags & F_MCAP_LOC;
}

bool kernel_subflow_initial_server(struct kernel_subflow const *sf)
{
        return !(sf->flags & (F_MCAP_LOC | F_JOIN_LOC));
}

// ----------------------------------------------------------------
//                          Helpers
// ----------------------------------------------------------------

/// Directory for the test's configuration and status files.
static char tmpdir[] = "/tmp/gwsteer-plugin-test-XXXXXX";

/**
 * @brief Socket address from text and port (static buffer per slot).
 */
static struct sockaddr *sa(char const *ip, unsigned int port)
{
        static struct sockaddr_storage slots[8];
        static unsigned int next;
        struct sockaddr_storage *const ss = &slots[next++ % 8];

        gwsteer_parse_addr(ip, ss);
        if (ss->ss_family == AF_INET)
                ((struct sockaddr_in *) ss)->sin_port = htons(port);
        else
                ((struct sockaddr_in6 *) ss)->sin6_port = htons(port);

        return (struct sockaddr *) ss;
}

/**
 * @brief Run the event loop for @a ms milliseconds.
 */
static void run_for(unsigned int ms)
{
        uint64_t const end = l_time_now() + (uint64_t) ms * 1000;

        while (l_time_now() < end) {
                l_main_iterate(5);
                deliver_replies();
        }
}

/**
 * Run the event loop in 5 ms steps until @a cond holds, for at most
 * @a max_ms: on a loaded machine timers run late, so a test waits for
 * what it expects rather than a fixed time.
 */
#define RUN_UNTIL(cond, max_ms)                                         \
        for (unsigned int waited_ = 0; waited_ < (max_ms) && !(cond);   \
             waited_ += 5)                                              \
                run_for(5)

/// Fast probes, for every test.
#define PROBES "[gwsteer]\nprobe_target = 10.99.0.1\n"                 \
        "probe_interval_ms = 10\nprobe_timeout_ms = 30\n"             \
        "fail_after = 1\nrecover_after = 1\nhold_ms = 10\n"

/// Fast probes and short intervals.
#define FAST_PROBES PROBES "status_interval_ms = 10\n"

/**
 * Common [gwsteer] settings.  A subflow request that this fake kernel
 * never answers is retried after subflow_timeout_ms: long enough here
 * that a loaded machine's slow test loop does not retry a request behind
 * a test counting exact requests; the tests of retries set their own.
 */
#define FAST FAST_PROBES "subflow_timeout_ms = 2000\n"

/// FAST, but the status file is rewritten (maintenance) only every 5 s.
#define SLOW_STATUS PROBES "status_interval_ms = 5000\n"                \
        "subflow_timeout_ms = 2000\n"

/// Two IPv4 gateways.
#define GW12 "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"    \
        "[gateway gw2]\nsource = 10.1.2.2\nhops = 10.1.2.1\n"

/**
 * @brief Start the plugin with @a conf; gateways come up.
 */
static bool start(char const *conf)
{
        char *const path = l_strdup_printf("%s/gw.conf", tmpdir);
        FILE *const f = fopen(path, "w");

        // The status_file line goes into [gwsteer], right after its header.
        char const *const body = strchr(conf, '\n') + 1;
        fprintf(f, "[gwsteer]\nstatus_file = %s/st.json\n%s", tmpdir, body);
        fclose(f);
        setenv(GWSTEER_CONFIG_ENV, path, 1);
        l_free(path);

        ncmds = 0;
        nreplies = 0;  // nkernel: set by the test before start().
        memset(fail_next, 0, sizeof(fail_next));
        t0_us = l_time_now();

        if (_mptcpd_plugin.init(PM) != 0)
                return false;

        run_for(30);  // First probe round answered: gateways up.
        return true;
}

/**
 * @brief Stop the plugin.
 */
static void stop(void)
{
        _mptcpd_plugin.exit(PM);
        nkernel = 0;
        nkaddrs = 0;
        memset(kernel_ack_at_us, 0, sizeof(kernel_ack_at_us));
}

/**
 * @brief A client connection from @a local to the proxy, established.
 */
static void connect_client(uint32_t token, char const *local,
                           char const *remote)
{
        ops->new_connection(token, sa(local, 40000), sa(remote, 5201),
                            false, PM);
        ops->connection_established(token, sa(local, 40000),
                                    sa(remote, 5201), false, PM);
}

// ----------------------------------------------------------------
//                          Tests
// ----------------------------------------------------------------

/**
 * @brief A reused token starts from scratch (new peer, new subflows).
 */
static void test_token_reuse(void)
{
        CHECK(start(FAST GW12));
        connect_client(7, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        CHECK(strcmp(cmds[ncmds - 1].remote, "10.99.0.1") == 0);

        // Same token, other peer, no CLOSED event in between.
        size_t const before = ncmds;
        connect_client(7, "10.1.1.2", "10.99.0.7");
        unsigned int to_new_peer = 0;
        for (size_t i = before; i < ncmds; ++i)
                to_new_peer += cmds[i].kind == CMD_ADD_SUBFLOW
                        && strcmp(cmds[i].remote, "10.99.0.7") == 0;
        CHECK(to_new_peer == 1);
        stop();
}

/**
 * @brief No v6 source toward a v4 peer; timeouts back off.
 */
static void test_family_and_backoff(void)
{
        CHECK(start(FAST_PROBES "subflow_timeout_ms = 40\n"
                    "[gateway gw1]\nsource = 10.1.1.2\n"
                    "hops = 10.1.1.1\n"
                    "[gateway gw6]\nsource = fc00:1::2\nhops = fc00:1::1\n"
                    "[gateway gw2]\nsource = 10.1.2.2\nhops = 10.1.2.1\n"));
        connect_client(8, "10.1.1.2", "10.99.0.1");
        run_for(600);  // gw2's subflow never comes up: 40 ms timeouts.

        CHECK(count(CMD_ADD_SUBFLOW, "fc00:1::2") == 0);

        unsigned int const tries = count(CMD_ADD_SUBFLOW, "10.1.2.2");
        int64_t gaps[16] = { 0 };
        int64_t last = -1;
        unsigned int n = 0;

        for (size_t i = 0; i < ncmds && n < 16; ++i)
                if (cmds[i].kind == CMD_ADD_SUBFLOW
                    && strcmp(cmds[i].local, "10.1.2.2") == 0) {
                        if (last >= 0)
                                gaps[n++] = cmds[i].at_ms - last;
                        last = cmds[i].at_ms;
                }

        // Without back-off: a retry every ~50 ms, a dozen in 600 ms.
        fprintf(stderr, "gw2 requests in 600 ms: %u\n", tries);
        CHECK(tries >= 2 && tries <= 7);
        CHECK(n >= 2 && gaps[n - 1] > gaps[0]);
        stop();
}

/**
 * @brief peers =: a tunnel's gateway carries only connections to the
 *        address inside the tunnels, and carries all of them.
 */
static void test_peers_pick_gateways(void)
{
        CHECK(start(FAST GW12
                    "[gateway gw1-tun]\nsource = 10.200.1.2\n"
                    "hops = 10.200.1.1\npeers = 10.200.0.1/32\n"
                    "route = external\n"
                    "[gateway gw2-tun]\nsource = 10.200.2.2\n"
                    "hops = 10.200.2.1\npeers = 10.200.0.1/32\n"
                    "route = external\n"));
        connect_client(11, "10.200.1.2", "10.200.0.1");
        connect_client(12, "10.1.1.2", "10.99.0.1");

        // To the inner address: the other tunnel only, no WAN source.
        CHECK(count(CMD_ADD_SUBFLOW, "10.200.2.2") == 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.1.2") == 0);
        CHECK(count(CMD_ADD_SUBFLOW, "10.200.1.2") == 0);

        // Nor in the retries of the subflows this fake never brings up.
        run_for(100);

        for (size_t i = 0; i < ncmds; ++i)
                if (cmds[i].kind == CMD_ADD_SUBFLOW)
                        CHECK(strcmp(cmds[i].remote, strncmp(cmds[i].local,
                                     "10.200.", 7) == 0
                                     ? "10.200.0.1" : "10.99.0.1") == 0);
        stop();
}

/**
 * @brief A removal that was not sent is retried; ours do not back off.
 *
 * The retry comes at its own time, also when maintenance runs only every
 * few seconds (@a conf SLOW_STATUS).
 */
static void test_remove_bookkeeping(char const *conf)
{
        CHECK(start(conf));
        connect_client(9, "10.1.1.2", "10.99.0.1");
        ops->new_subflow(9, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);

        fail_next[CMD_REMOVE_SUBFLOW] = EAGAIN;
        set_answering("10.1.2.2", false);
        run_for(150);  // gw2 down; the first removal request fails.

        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") >= 2);

        // The kernel confirms: no further removal, and no retry storm.
        ops->subflow_closed(9, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                            false, PM);
        size_t const removes = count(CMD_REMOVE_SUBFLOW, "10.1.2.2");
        run_for(100);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") == removes);
        stop();
}

/**
 * @brief A backup flag counts as applied only once the kernel shows it.
 */
static void test_backup_confirmed_by_kernel(void)
{
        CHECK(start(FAST_PROBES "subflow_timeout_ms = 40\n"
                    "[gateway gw1]\nsource = 10.1.1.2\n"
                    "hops = 10.1.1.1\n"
                    "[gateway gw2]\nsource = 10.1.2.2\nhops = 10.1.2.1\n"
                    "backup = true\n"));
        connect_client(10, "10.1.1.2", "10.99.0.1");
        // mptcpd 0.12 says backup=true; the kernel (below) says no.
        ops->new_subflow(10, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         true, PM);
        kernel[0] = (struct kernel_subflow) { .token = 10, .flags = F_JOIN_LOC };
        memcpy(&kernel[0].laddr, sa("10.1.2.2", 40001),
               sizeof(struct sockaddr_in));
        memcpy(&kernel[0].raddr, sa("10.99.0.1", 5201),
               sizeof(struct sockaddr_in));
        nkernel = 1;

        run_for(150);  // Refused (never shows): asked again after 40 ms.
        unsigned int const refused = count(CMD_SET_BACKUP, "10.1.2.2");
        CHECK(refused >= 2);

        kernel[0].flags |= F_BKUP_LOC;  // Now the kernel has it.
        run_for(100);
        unsigned int const settled = count(CMD_SET_BACKUP, "10.1.2.2");
        run_for(150);
        CHECK(count(CMD_SET_BACKUP, "10.1.2.2") == settled);
        stop();
}

/**
 * @brief Health callbacks act from the event loop, not inside record().
 */
static void test_health_change_deferred(void)
{
        CHECK(start(FAST GW12));
        set_answering("10.1.2.2", false);
        run_for(100);  // gw2 down.
        connect_client(11, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 0);

        set_answering("10.1.2.2", true);

        /*
         * Answer gw2's probes by hand until it is back (the hold time
         * decides which answer that is): no answer may open a subflow
         * while it is being recorded, the event loop opens it after.
         */
        bool reentered = false;
        unsigned int rounds = 0;

        while (count(CMD_ADD_SUBFLOW, "10.1.2.2") == 0 && rounds++ < 100) {
                while (nreplies == 0)
                        l_main_iterate(5);

                size_t const n = nreplies;
                nreplies = 0;
                for (size_t i = 0; i < n; ++i)
                        if (replies[i].p != NULL)
                                replies[i].p->on_reply(replies[i].seq,
                                                       replies[i].p->user_data);

                reentered |= count(CMD_ADD_SUBFLOW, "10.1.2.2") != 0;
                l_main_iterate(0);  // The deferred work, if any.
        }

        CHECK(!reentered);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        stop();
}

/**
 * @brief max_subflows counts the initial subflow; preferred gateways first.
 */
static void test_max_subflows_and_preference(void)
{
        CHECK(start(FAST "max_subflows = 2\n"
                    "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"
                    "backup = true\n"
                    "[gateway gw2]\nsource = 10.1.2.2\nhops = 10.1.2.1\n"
                    "[gateway gw3]\nsource = 10.1.3.2\nhops = 10.1.3.1\n"));
        // Initial subflow from an address that is no gateway's source.
        connect_client(12, "10.1.9.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, NULL) == 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);  // Not gw1: backup.
        stop();

        // No backups: the best gateway (AvMet) first, though last in the file.
        fastest_source = "10.1.3.2";
        CHECK(start(FAST "max_subflows = 2\n"
                    "[gateway gw1]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"
                    "[gateway gw2]\nsource = 10.1.2.2\nhops = 10.1.2.1\n"
                    "[gateway gw3]\nsource = 10.1.3.2\nhops = 10.1.3.1\n"));
        run_for(200);  // gw3 answers first every round: the best.
        connect_client(14, "10.1.9.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, NULL) == 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.2") == 1);
        fastest_source = NULL;
        stop();

        // Proxy: the initial subflow and one join, the next join closed.
        CHECK(start("[gwsteer]\nrole = proxy\nmax_subflows = 2\n"
                    "status_interval_ms = 10\n"));
        ops->new_connection(13, sa("10.99.0.1", 5201), sa("10.1.1.2", 4000),
                            true, PM);
        ops->connection_established(13, sa("10.99.0.1", 5201),
                                    sa("10.1.1.2", 4000), true, PM);
        ops->new_subflow(13, sa("10.99.0.1", 5201), sa("10.1.2.2", 4001),
                         false, PM);
        CHECK(count(CMD_REMOVE_SUBFLOW, NULL) == 0);
        ops->new_subflow(13, sa("10.99.0.1", 5201), sa("10.1.3.2", 4002),
                         false, PM);
        CHECK(count(CMD_REMOVE_SUBFLOW, NULL) == 1);
        CHECK(strcmp(cmds[ncmds - 1].remote, "10.1.3.2") == 0);

        // A join whose removal could not be sent is closed later.
        fail_next[CMD_REMOVE_SUBFLOW] = EAGAIN;
        ops->new_subflow(13, sa("10.99.0.1", 5201), sa("10.1.4.2", 4003),
                         false, PM);
        CHECK(count(CMD_REMOVE_SUBFLOW, NULL) == 2);
        run_for(30);  // status_interval_ms = 10: maintenance retries.
        CHECK(count(CMD_REMOVE_SUBFLOW, NULL) >= 3);
        stop();
}

/**
 * @brief A preferred gateway that comes back takes its place again.
 *
 * With max_subflows used up, a gateway that recovers would otherwise
 * wait for a free place for ever: the backup gateway's subflow that
 * stood in for it is closed, and the recovered gateway gets its own.
 */
static void test_recovered_gateway_displaces_backup(void)
{
        CHECK(start(FAST "max_subflows = 2\n" GW12
                    "[gateway gw3]\nsource = 10.1.3.2\nhops = 10.1.3.1\n"
                    "backup = true\n"));
        connect_client(15, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.2") == 0);  // No place.
        ops->new_subflow(15, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);

        set_answering("10.1.2.2", false);
        run_for(150);  // gw2 down: its subflow goes, the backup stands in.
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") >= 1);
        ops->subflow_closed(15, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                            false, PM);
        run_for(50);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.2") == 1);
        ops->new_subflow(15, sa("10.1.3.2", 40002), sa("10.99.0.1", 5201),
                         true, PM);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.3.2") == 0);

        set_answering("10.1.2.2", true);
        run_for(150);  // gw2 back: the backup's subflow makes room for it.
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.3.2") >= 1);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") >= 2);
        ops->subflow_closed(15, sa("10.1.3.2", 40002), sa("10.99.0.1", 5201),
                            true, PM);
        ops->new_subflow(15, sa("10.1.2.2", 40003), sa("10.99.0.1", 5201),
                         false, PM);

        // Settled: the backup stays out while gw2 is up.
        unsigned int const backups = count(CMD_ADD_SUBFLOW, "10.1.3.2");
        run_for(150);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.2") == backups);
        stop();
}

/**
 * @brief A removal the kernel never confirms is asked again after
 *        subflow_timeout_ms (2 s), not at the next maintenance run (5 s).
 */
static void test_unconfirmed_removal_asked_again(void)
{
        CHECK(start(SLOW_STATUS GW12));
        connect_client(21, "10.1.1.2", "10.99.0.1");
        ops->new_subflow(21, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);
        set_answering("10.1.2.2", false);
        run_for(150);  // gw2 down: its subflow's removal is asked.
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") == 1);

        run_for(2900);
        fprintf(stderr, "removal requests 3 s after the first: %u\n",
                count(CMD_REMOVE_SUBFLOW, "10.1.2.2"));
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") == 2);
        stop();
}

/**
 * @brief The backup flag last asked for on @a local's subflow: 1, 0, or
 *        -1 if none was.
 */
static int last_backup(char const *local)
{
        for (size_t i = ncmds; i-- > 0;)
                if (cmds[i].kind == CMD_SET_BACKUP
                    && strcmp(cmds[i].local, local) == 0)
                        return cmds[i].flag;
        return -1;
}

/**
 * @brief prefer_best keeps one gateway of each connection non-backup,
 *        the best of those that serve it.
 *
 * The best gateway overall may not reach a connection's peer (an IPv6
 * gateway and an IPv4 peer; a tunnel's gateway, peers =).  Every
 * subflow of such a connection was flagged backup, and the kernel,
 * with no other subflow, used them all alike: no preference at all.
 */
static void test_prefer_best_per_connection(void)
{
        fastest_source = "fc00:1::2";
        CHECK(start(FAST "prefer_best = true\n"
                    "[gateway gw6]\nsource = fc00:1::2\nhops = fc00:1::1\n"
                    GW12));
        // gw6 answers first every round: the best; gw1 in 2 ms, gw2 in 6.
        set_reply_delay("10.1.1.2", 2);
        set_reply_delay("10.1.2.2", 6);
        run_for(200);
        connect_client(17, "10.1.1.2", "10.99.0.1");
        ops->new_subflow(17, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);
        run_for(100);
        fprintf(stderr, "IPv4 connection, gw6 best overall: backup asked "
                "gw1 %d gw2 %d\n", last_backup("10.1.1.2"),
                last_backup("10.1.2.2"));
        // gw1 answers before gw2 in every round: the best of the two.
        CHECK(last_backup("10.1.1.2") == 0);
        CHECK(last_backup("10.1.2.2") == 1);
        fastest_source = NULL;
        stop();
}

/**
 * @brief Milliseconds from @a closed_at_ms to the first subflow request
 *        of @a token through gw2 among cmds[@a from ...], or -1 if none
 *        came.
 */
static int64_t token_gap_after(uint32_t token, size_t from,
                               int64_t closed_at_ms)
{
        for (size_t i = from; i < ncmds; ++i)
                if (cmds[i].kind == CMD_ADD_SUBFLOW && cmds[i].token == token
                    && strcmp(cmds[i].local, "10.1.2.2") == 0)
                        return cmds[i].at_ms - closed_at_ms;
        return -1;
}

/**
 * @brief token_gap_after() for the retry test's connection, token 16.
 */
static int64_t gap_after(size_t from, int64_t closed_at_ms)
{
        return token_gap_after(16, from, closed_at_ms);
}

/**
 * @brief Close gw2's subflow of @a token from @a port quickly, @a times
 *        times in a row, each after its retry came; return the port of
 *        the next subflow.
 */
static uint16_t close_quickly(uint32_t token, uint16_t port,
                              unsigned int times, int64_t *gaps)
{
        for (unsigned int i = 0; i < times; ++i, ++port) {
                ops->new_subflow(token, sa("10.1.2.2", port),
                                 sa("10.99.0.1", 5201), false, PM);
                size_t const from = ncmds;
                int64_t const closed = now_ms();
                ops->subflow_closed(token, sa("10.1.2.2", port),
                                    sa("10.99.0.1", 5201), false, PM);
                RUN_UNTIL(token_gap_after(token, from, closed) >= 0, 500);
                gaps[i] = token_gap_after(token, from, closed);
        }

        return port;
}

/**
 * @brief A subflow that closes by itself is retried at its back-off, not
 *        at the next status rewrite; a subflow that lived longer than
 *        the back-off in force starts the back-off from the beginning.
 *
 * status_interval_ms is how often the status file is rewritten: an
 * operator may set it to a minute to spare a flash disk, and the retry
 * of a gateway must not wait for it.
 */
static void test_retry_follows_backoff(void)
{
        CHECK(start(SLOW_STATUS GW12));
        connect_client(16, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);

        // Five subflows that die at once (a middlebox resetting joins):
        // back-offs of 10, 20, 40, 80, 160 ms, each retried on time.
        int64_t gaps[6] = { 0 };
        uint16_t const port = close_quickly(16, 40001, 5, gaps);
        fprintf(stderr, "gw2 retries after quick closes (ms): %" PRId64
                " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
                gaps[0], gaps[1], gaps[2], gaps[3], gaps[4]);
        for (unsigned int i = 0; i < 5; ++i)
                CHECK(gaps[i] >= 0 && gaps[i] < 450);  // Not 5 s.
        CHECK(gaps[0] >= 5 && gaps[4] >= 120);  // Backed off: 10, 160 ms.

        // One that carried traffic for 500 ms, longer than the 160 ms
        // back-off now in force: its close is a new failure, retried
        // after the first step again, not after the next (320 ms).
        ops->new_subflow(16, sa("10.1.2.2", port), sa("10.99.0.1", 5201),
                         false, PM);
        run_for(500);
        size_t const from = ncmds;
        int64_t const closed = now_ms();
        ops->subflow_closed(16, sa("10.1.2.2", port), sa("10.99.0.1", 5201),
                            false, PM);
        run_for(300);
        gaps[5] = gap_after(from, closed);
        fprintf(stderr, "gw2 retry after a subflow that lived 500 ms: %"
                PRId64 " ms\n", gaps[5]);
        CHECK(gaps[5] >= 5 && gaps[5] < 200);  // 10 ms, not 320.
        stop();
}

/**
 * @brief Retries of several connections each come at their own time.
 *
 * The due timer holds the earliest deadline only.  A retry due later
 * than the one the timer served must still come at its back-off, not
 * at the next status rewrite (5 s here).
 */
static void test_every_retry_comes_on_time(void)
{
        CHECK(start(SLOW_STATUS GW12));
        connect_client(18, "10.1.1.2", "10.99.0.1");
        connect_client(19, "10.1.1.2", "10.99.0.1");

        // Token 18 backs off to 160 ms; token 19's first failure waits
        // 10 ms and takes the due timer from it.
        int64_t gaps[5] = { 0 };

        close_quickly(18, 41001, 4, gaps);
        ops->new_subflow(18, sa("10.1.2.2", 41005), sa("10.99.0.1", 5201),
                         false, PM);
        ops->new_subflow(19, sa("10.1.2.2", 42001), sa("10.99.0.1", 5201),
                         false, PM);
        size_t const from = ncmds;
        int64_t const closed = now_ms();
        ops->subflow_closed(18, sa("10.1.2.2", 41005), sa("10.99.0.1", 5201),
                            false, PM);
        ops->subflow_closed(19, sa("10.1.2.2", 42001), sa("10.99.0.1", 5201),
                            false, PM);
        RUN_UNTIL(token_gap_after(18, from, closed) >= 0, 1000);

        int64_t const late = token_gap_after(18, from, closed);
        int64_t const early = token_gap_after(19, from, closed);

        fprintf(stderr, "retries after simultaneous closes (ms): "
                "160 ms back-off %" PRId64 ", 10 ms back-off %" PRId64 "\n",
                late, early);
        CHECK(early >= 5 && early < 120);
        CHECK(late >= 120 && late < 450);  // Not at the 5 s rewrite.
        stop();
}

/**
 * @brief Proxy announcements share one listener; closes give it back.
 */
static void test_announce_listener_references(void)
{
        CHECK(start("[gwsteer]\nrole = proxy\nannounce = 10.99.0.2\n"));

        for (uint32_t t = 20; t < 30; ++t) {
                ops->new_connection(t, sa("10.99.0.1", 5201),
                                    sa("10.1.1.2", 4000 + t), true, PM);
                ops->connection_established(t, sa("10.99.0.1", 5201),
                                            sa("10.1.1.2", 4000 + t), true,
                                            PM);
                ops->connection_closed(t, PM);
        }

        // Every announcement after the first reuses the first one's port,
        // and every connection gives its reference back.
        CHECK(count(CMD_ADD_ADDR, "10.99.0.2") == 10);
        unsigned int same_port = 0;
        for (size_t i = 0; i < ncmds; ++i)
                same_port += cmds[i].kind == CMD_ADD_ADDR && cmds[i].flag;
        CHECK(same_port == 10);
        CHECK(count(CMD_LM_CLOSE, "10.99.0.2") == 9);
        stop();
}

/**
 * @brief Connections that exist at start-up are picked up.
 */
static void test_pickup_at_start(void)
{
        kernel[0] = (struct kernel_subflow) { .token = 30,
                                              .flags = F_MCAP_LOC };
        memcpy(&kernel[0].laddr, sa("10.1.1.2", 40000),
               sizeof(struct sockaddr_in));
        memcpy(&kernel[0].raddr, sa("10.99.0.1", 5201),
               sizeof(struct sockaddr_in));
        nkernel = 1;
        plugin_new_connections = 0;

        CHECK(start(FAST GW12));
        CHECK(plugin_new_connections == 1);  // Registered with mptcpd.
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        stop();
}

/**
 * @brief Set a fake kernel subflow: @a token, flags, local and remote.
 */
static void kernel_subflow_at(size_t i, uint32_t token, uint32_t flags,
                              struct sockaddr const *l,
                              struct sockaddr const *r)
{
        kernel[i] = (struct kernel_subflow) { .token = token,
                                              .flags = flags };
        memcpy(&kernel[i].laddr, l, sizeof(struct sockaddr_in));
        memcpy(&kernel[i].raddr, r, sizeof(struct sockaddr_in));
}

/**
 * @brief Set an address id the fake kernel holds for @a token.
 */
static void kernel_addr_at(size_t i, uint32_t token,
                           struct sockaddr const *a, uint8_t id)
{
        kaddrs[i].token = token;
        memcpy(&kaddrs[i].a.addr, a, sizeof(struct sockaddr_in));
        kaddrs[i].a.id = id;
}

/**
 * @brief Find the recorded announcement on @a token (or NULL).
 */
static struct cmd const *announcement(uint32_t token)
{
        for (size_t i = 0; i < ncmds; ++i)
                if (cmds[i].kind == CMD_ADD_ADDR && cmds[i].token == token)
                        return &cmds[i];

        return NULL;
}

/**
 * @brief A proxy picks up connections and announces on them again.
 *
 * The kernel still holds the previous mptcpd's announcement (its id
 * with the dead listener's port) and refuses the same id for another
 * port: the new announcement takes an id the connection does not
 * use, or the id the kernel holds for this very address and port.
 * Every picked-up connection but the one whose announcement opened
 * the listener holds a listener reference and gives it back.
 */
static void test_proxy_pickup_reannounces(void)
{
        // mptcpd's id for 10.99.0.2 (the fake id manager's rule).
        mptcpd_aid_t const idm_id = mptcpd_idm_get_id(
                NULL, sa("10.99.0.2", 0));

        for (uint32_t t = 40; t < 43; ++t)
                kernel_subflow_at(t - 40, t, 0, sa("10.99.0.1", 5201),
                                  sa("10.1.1.2", 40000 + t));
        nkernel = 3;
        // 40: mptcpd's id taken by the old listener's port, and the next.
        kernel_addr_at(0, 40, sa("10.99.0.2", 39999), idm_id);
        kernel_addr_at(1, 40, sa("10.99.0.2", 0), (uint8_t) (idm_id + 1));
        // 41: the id is free (nothing announced before).
        // 42: already holds this address with the new listener's port.
        kernel_addr_at(2, 42, sa("10.99.0.2", ANNOUNCE_PORT), 9);
        nkaddrs = 3;
        plugin_new_connections = 0;

        CHECK(start("[gwsteer]\nrole = proxy\nannounce = 10.99.0.2\n"));
        CHECK(plugin_new_connections == 3);
        CHECK(count(CMD_ADD_ADDR, "10.99.0.2") == 3);

        struct cmd const *const a40 = announcement(40);
        struct cmd const *const a41 = announcement(41);
        struct cmd const *const a42 = announcement(42);

        CHECK(a40 != NULL && a40->id == idm_id + 2u);
        CHECK(a41 != NULL && a41->id == idm_id);
        CHECK(a42 != NULL && a42->id == 9);

        for (uint32_t t = 40; t < 43; ++t)
                ops->connection_closed(t, PM);
        // Three announcements, one listener: two references given back.
        CHECK(count(CMD_LM_CLOSE, "10.99.0.2") == 2);
        stop();
}

/**
 * @brief Backup flag requests with value @a flag for subflows from @a local.
 */
static unsigned int backup_requests(char const *local, bool flag,
                                    size_t from)
{
        unsigned int n = 0;

        for (size_t i = from; i < ncmds; ++i)
                n += cmds[i].kind == CMD_SET_BACKUP && cmds[i].flag == flag
                        && strcmp(cmds[i].local, local) == 0;

        return n;
}

/**
 * @brief Run until a backup flag request with value @a flag for a subflow
 *        from @a local comes (among cmds[@a from ...]), for at most
 *        @a max_ms (the stall watch polls every 20 ms); return how many
 *        came.
 */
static unsigned int await_backup_request(char const *local, bool flag,
                                         size_t from, unsigned int max_ms)
{
        RUN_UNTIL(backup_requests(local, flag, from) > 0, max_ms);
        return backup_requests(local, flag, from);
}

/**
 * @brief The kernel shows subflow @a i of @a token from @a local:@a port.
 */
static void kernel_subflow(size_t i, uint32_t token, char const *local,
                           unsigned int port, uint32_t flags)
{
        kernel[i] = (struct kernel_subflow) {
                .token = token, .flags = flags, .has_tcp_info = true,
                .unacked = 10, .rtt_us = 1000,
        };
        memcpy(&kernel[i].laddr, sa(local, port), sizeof(struct sockaddr_in));
        memcpy(&kernel[i].raddr, sa("10.99.0.1", 5201),
               sizeof(struct sockaddr_in));
        kernel_ack_at_us[i] = 0;
        if (i >= nkernel)
                nkernel = i + 1;
}

/**
 * @brief Connection @a token over gw1 (10.1.1.2) with a subflow joined
 *        over gw2 (10.1.2.2), as the plugin and the kernel both see it.
 */
static void connect_over_both_gateways(uint32_t token)
{
        connect_client(token, "10.1.1.2", "10.99.0.1");
        ops->new_subflow(token, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);
        kernel_subflow(0, token, "10.1.1.2", 40000, F_MCAP_LOC);
        kernel_subflow(1, token, "10.1.2.2", 40001, F_JOIN_LOC);
}

/**
 * @brief stall_ms: a subflow with data outstanding and no ACK gets the
 *        backup flag (no new data) while another one flows, and loses it
 *        when ACKs come again; it is not removed (its gateway still
 *        answers probes).
 */
static void test_stalled_subflow_backup(void)
{
        CHECK(start(FAST "stall_ms = 60\n" GW12));
        connect_over_both_gateways(12);

        // Both acknowledge as they send: nothing happens.
        run_for(150);
        CHECK(backup_requests("10.1.1.2", true, 0) == 0);
        CHECK(backup_requests("10.1.2.2", true, 0) == 0);

        // gw1 goes silent: not before stall_ms, soon after it.
        size_t mark = ncmds;
        uint64_t const silent = l_time_now();
        kernel_ack_at_us[0] = silent;
        run_for(40);
        CHECK(backup_requests("10.1.1.2", true, mark) == 0);
        CHECK(await_backup_request("10.1.1.2", true, mark, 500) >= 1);
        CHECK(backup_requests("10.1.2.2", true, mark) == 0);
        // Not before stall_ms, within the plugin's resolution: the
        // kernel reports the last ACK in whole milliseconds and the plugin
        // keeps watching through STALL_ACK_SLACK_US (2 ms) of ACK jitter,
        // so its watch may start up to 3 ms before the silence did.
        for (size_t i = mark; i < ncmds; ++i)
                if (cmds[i].kind == CMD_SET_BACKUP && cmds[i].flag)
                        CHECK(cmds[i].at_ms
                              >= (int64_t) (silent - t0_us) / 1000 + 60 - 3);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.1.2") == 0);

        // The kernel holds the flag; ACKs come again: flag cleared.
        kernel[0].flags |= F_BKUP_LOC;
        kernel_ack_at_us[0] = 0;
        kernel[0].last_ack_ms = 0;
        mark = ncmds;
        CHECK(await_backup_request("10.1.1.2", false, mark, 500) >= 1);
        kernel[0].flags &= ~F_BKUP_LOC;

        // Both silent: neither is flagged (the scheduler needs one).
        run_for(60);
        mark = ncmds;
        kernel_ack_at_us[0] = kernel_ack_at_us[1] = l_time_now();
        run_for(150);
        CHECK(backup_requests("10.1.1.2", true, mark) == 0);
        CHECK(backup_requests("10.1.2.2", true, mark) == 0);

        // Idle for long, then one send acknowledged within stall_ms:
        // the old last ACK does not count, only what the polls saw.
        kernel_ack_at_us[0] = kernel_ack_at_us[1] = 0;
        kernel[1].last_ack_ms = 0;
        kernel[0].unacked = 0;
        run_for(60);
        mark = ncmds;
        kernel[0].unacked = 1;
        kernel[0].last_ack_ms = 5000;
        run_for(40);
        kernel[0].unacked = 0;
        run_for(100);
        CHECK(backup_requests("10.1.1.2", true, mark) == 0);

        // Two RTTs count when longer than stall_ms (RTT 100 ms: 200 ms).
        kernel[0].unacked = 10;
        kernel[0].rtt_us = 100000;
        mark = ncmds;
        kernel_ack_at_us[0] = l_time_now();
        run_for(140);
        CHECK(backup_requests("10.1.1.2", true, mark) == 0);
        CHECK(await_backup_request("10.1.1.2", true, mark, 600) >= 1);
        stop();

        // stall_remove: the stalled subflow is removed, not flagged.
        CHECK(start(FAST "stall_ms = 60\nstall_remove = true\n" GW12));
        connect_over_both_gateways(14);
        run_for(100);
        CHECK(count(CMD_REMOVE_SUBFLOW, NULL) == 0);
        uint64_t const quiet = l_time_now();
        kernel_ack_at_us[0] = quiet;
        run_for(40);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.1.2") == 0);
        RUN_UNTIL(count(CMD_REMOVE_SUBFLOW, "10.1.1.2") > 0, 500);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.1.2") >= 1);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") == 0);
        CHECK(backup_requests("10.1.1.2", true, 0) == 0);
        for (size_t i = 0; i < ncmds; ++i)
                if (cmds[i].kind == CMD_REMOVE_SUBFLOW)
                        CHECK(cmds[i].at_ms
                              >= (int64_t) (quiet - t0_us) / 1000 + 60);
        stop();

        // stall_ms 0 (the default): no stall watch at all.
        CHECK(start(FAST GW12));
        connect_over_both_gateways(13);
        kernel_ack_at_us[0] = l_time_now();
        run_for(200);
        CHECK(backup_requests("10.1.1.2", true, 0) == 0);
        stop();
}

/**
 * @brief Read the status file (static buffer).
 */
static char const *status_text(void)
{
        static char buf[4096];
        char *const path = l_strdup_printf("%s/st.json", tmpdir);
        FILE *const f = fopen(path, "r");
        size_t n = 0;

        if (f != NULL) {
                n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
        }
        buf[n] = '\0';
        l_free(path);
        return buf;
}

/**
 * @brief interface =: the gateway follows the interface's address.
 *
 * A new address (DHCP renew) moves the gateway's subflow to it; the
 * interface going away takes the gateway down at once; its return
 * (hotplug) brings it back with a subflow from its new address.
 */
static void test_interface_follows_address(void)
{
        struct mptcpd_interface *const wan = &fake_ifs[0];

        *wan = (struct mptcpd_interface) {
                .family = AF_UNSPEC, .index = 5,
                .flags = IFF_UP | IFF_RUNNING, .name = "wan0",
                .addrs = l_queue_new(),
        };
        nfake_ifs = 1;
        fake_if_add(wan, "fe80::1");  // Not a usable IPv4 source.
        fake_if_add(wan, "10.1.2.2");

        CHECK(start(FAST "[gateway gw1]\nsource = 10.1.1.2\n"
                    "hops = 10.1.1.1\n[gateway wan]\ninterface = wan0\n"));
        run_for(30);
        CHECK(strstr(status_text(), "\"id\":\"wan\",\"source\":\"10.1.2.2\","
                     "\"interface\":\"wan0\",\"up\":true") != NULL);

        connect_client(30, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.2") == 1);
        ops->new_subflow(30, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);

        // DHCP renew to another address: the new one comes first.
        ops->new_local_address(wan, fake_if_add(wan, "10.1.2.3"), PM);
        run_for(30);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.3") == 1);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") >= 1);
        ops->new_subflow(30, sa("10.1.2.3", 40002), sa("10.99.0.1", 5201),
                         false, PM);
        unsigned int const opened = count(CMD_ADD_SUBFLOW, "10.1.2.3");
        ops->subflow_closed(30, sa("10.1.2.2", 40001), sa("10.99.0.1", 5201),
                            false, PM);

        struct sockaddr_storage old;
        gwsteer_parse_addr("10.1.2.2", &old);
        l_free(l_queue_remove_if(wan->addrs, same_ip_match, &old));
        ops->delete_local_address(wan, (struct sockaddr *) &old, PM);
        run_for(30);
        // The old address going changes nothing more.
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.3") == 0);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.3") == opened);

        // A join asked for from the old address that comes up late: closed.
        unsigned int const removals = count(CMD_REMOVE_SUBFLOW, "10.1.2.2");
        ops->new_subflow(30, sa("10.1.2.2", 40009), sa("10.99.0.1", 5201),
                         false, PM);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.2") == removals + 1);
        ops->subflow_closed(30, sa("10.1.2.2", 40009), sa("10.99.0.1", 5201),
                            false, PM);

        // Unplugged: down at once, its subflow goes.
        nfake_ifs = 0;
        ops->delete_interface(wan, PM);
        run_for(30);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.2.3") >= 1);
        CHECK(strstr(status_text(), "\"id\":\"wan\",\"source\":\"\","
                     "\"interface\":\"wan0\",\"up\":false") != NULL);
        ops->subflow_closed(30, sa("10.1.2.3", 40002), sa("10.99.0.1", 5201),
                            false, PM);

        // Plugged back in with a new lease: up again, a new subflow.
        l_queue_clear(wan->addrs, l_free);
        fake_if_add(wan, "10.1.2.4");
        nfake_ifs = 1;
        ops->new_interface(wan, PM);
        run_for(100);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.2.4") >= 1);  // Retried: never up.
        CHECK(strstr(status_text(), "\"source\":\"10.1.2.4\","
                     "\"interface\":\"wan0\",\"up\":true") != NULL);
        stop();
        nfake_ifs = 0;
        l_queue_destroy(wan->addrs, l_free);
}

/**
 * @brief source and interface: that address, only while the interface has it.
 */
static void test_interface_with_fixed_source(void)
{
        struct mptcpd_interface *const lan = &fake_ifs[0];

        *lan = (struct mptcpd_interface) {
                .family = AF_UNSPEC, .index = 6,
                .flags = IFF_UP | IFF_RUNNING, .name = "lan3",
                .addrs = l_queue_new(),
        };
        nfake_ifs = 1;
        fake_if_add(lan, "10.1.3.2");

        CHECK(start(FAST "[gateway gw1]\nsource = 10.1.1.2\n"
                    "hops = 10.1.1.1\n[gateway fixed]\nsource = 10.1.3.2\n"
                    "interface = lan3\nhops = 10.1.3.1\n"));
        run_for(30);
        connect_client(31, "10.1.1.2", "10.99.0.1");
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.2") == 1);
        ops->new_subflow(31, sa("10.1.3.2", 40001), sa("10.99.0.1", 5201),
                         false, PM);

        // Another address on the interface is not the gateway's.
        ops->new_local_address(lan, fake_if_add(lan, "10.1.3.9"), PM);
        run_for(30);
        CHECK(count(CMD_ADD_SUBFLOW, "10.1.3.9") == 0);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.3.2") == 0);

        // The interface goes down (link lost): so does the gateway.
        lan->flags = IFF_UP;
        ops->update_interface(lan, PM);
        run_for(30);
        CHECK(count(CMD_REMOVE_SUBFLOW, "10.1.3.2") >= 1);
        CHECK(strstr(status_text(), "\"id\":\"fixed\",\"source\":\"\","
                     "\"interface\":\"lan3\",\"up\":false") != NULL);
        stop();
        nfake_ifs = 0;
        l_queue_destroy(lan->addrs, l_free);
}

int main(void)
{
        l_log_set_stderr();

        if (!l_main_init() || mkdtemp(tmpdir) == NULL)
                return 1;

        test_token_reuse();
        test_family_and_backoff();
        test_peers_pick_gateways();
        test_remove_bookkeeping(FAST GW12);
        test_remove_bookkeeping(SLOW_STATUS GW12);
        test_unconfirmed_removal_asked_again();
        test_backup_confirmed_by_kernel();
        test_health_change_deferred();
        test_max_subflows_and_preference();
        test_recovered_gateway_displaces_backup();
        test_retry_follows_backoff();
        test_every_retry_comes_on_time();
        test_prefer_best_per_connection();
        test_announce_listener_references();
        test_pickup_at_start();
        test_proxy_pickup_reannounces();
        test_stalled_subflow_backup();
        test_interface_follows_address();
        test_interface_with_fixed_source();

        char *const cmd = l_strdup_printf("rm -rf %s", tmpdir);
        if (system(cmd) != 0)
                ++failures;
        l_free(cmd);
        l_main_exit();

        printf("test_plugin: %s (%d failed checks)\n",
               failures ? "FAIL" : "ok", failures);

        return failures ? 1 : 0;
}
