// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file test_gwsteer.c
 *
 * @brief Unit tests of the gwsteer core: configuration, health state
 *        machine, AvMet preference and the status file.
 *
 * The health tracker is driven with synthetic probe outcomes
 * (gateway_health_new_passive()), so the tests need no network.
 *
 * Usage: test_gwsteer            run the tests
 *        test_gwsteer subflows    list the kernel's MPTCP subflows
 *                                 (sock_diag, as the plugin sees them)
 */

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ell/ell.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "gateway_probe.h"
#include "kernel_subflows.h"
#include "status_file.h"

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

/// Milliseconds to microseconds.
#define MS(x) ((uint64_t) (x) * 1000)

/// Directory for temporary files.
static char tmpdir[] = "/tmp/gwsteer-test-XXXXXX";

/**
 * @brief Write @a text to a temporary config file and load it.
 */
static struct gwsteer_config *load_text(char const *text)
{
        char *const path = l_strdup_printf("%s/gw.conf", tmpdir);
        FILE *const f = fopen(path, "w");

        fputs(text, f);
        fclose(f);

        struct gwsteer_config *const c = gwsteer_config_load(path);
        l_free(path);

        return c;
}

/// A valid two-gateway configuration.
static char const good_conf[] =
        "[gwsteer]\n"
        "probe_target = 10.99.0.1\n"
        "fail_after = 2\n"
        "recover_after = 2\n"
        "hold_ms = 100\n"
        "ewma_alpha = 0.5\n"
        "switch_margin = 0.2\n"
        "[gateway gw1]\n"
        "source = 10.1.1.2\n"
        "hops = 10.1.1.1\n"
        "[gateway gw2]\n"
        "source = 10.1.0.3\n"
        "hops = fc00:e::1, fc00:2::d4\n"
        "backup = no\n";

/**
 * @brief Good file: values, defaults, derived probe targets.
 */
static void test_config_good(void)
{
        struct gwsteer_config *const c = load_text(good_conf);

        CHECK(c != NULL);
        if (c == NULL)
                return;

        CHECK(c->role == GWSTEER_ROLE_CLIENT);
        CHECK(c->fail_after == 2);
        CHECK(c->probe_interval_ms == 200);  // default from the header
        CHECK(strcmp(c->status_file, "/run/braid/gateways.json") == 0);
        CHECK(l_queue_length(c->gateways) == 2);

        struct gateway_spec const *const gw2 =
                l_queue_peek_tail(c->gateways);
        CHECK(strcmp(gw2->id, "gw2") == 0);
        CHECK(gw2->hop_count == 2);
        CHECK(gw2->probe.ss_family == AF_INET);  // probe_target

        gwsteer_config_free(c);
}

/**
 * @brief An address of either family, for peer matching.
 */
static struct sockaddr const *peer_addr(char const *text,
                                        struct sockaddr_storage *ss)
{
        CHECK(gwsteer_parse_addr(text, ss));
        return (struct sockaddr const *) ss;
}

/**
 * @brief peers = and route =: a tunnel's gateway serves only the
 *        address inside the tunnels, and only it serves that address.
 */
static void test_config_peers(void)
{
        struct gwsteer_config *const c = load_text(
                "[gwsteer]\nprobe_target = 198.51.100.10\n"
                "[gateway dsl]\nsource = 10.1.1.2\nhops = 10.1.1.1\n"
                "[gateway dsl-tun]\nsource = 10.200.1.2\n"
                "hops = 10.200.1.1\nprobe = 10.200.0.1\n"
                "peers = 10.200.0.1/32, 10.201.0.0/16\nroute = external\n"
                "[gateway lte-tun]\nsource = 10.200.2.2\n"
                "hops = 10.200.2.1\nprobe = 10.200.0.1\n"
                "peers = 10.200.0.1\nroute = gwsteer\n"
                "[gateway v6]\nsource = fc00:1::2\nhops = fc00:1::1\n"
                "probe = fc00:1::1\n");
        struct sockaddr_storage ss;

        CHECK(c != NULL);
        if (c == NULL)
                return;

        struct gateway_spec const *const dsl = l_queue_peek_head(c->gateways);
        struct gateway_spec const *const tun =
                l_queue_get_entries(c->gateways)->next->data;

        CHECK(!dsl->route_external && dsl->peer_count == 0);
        CHECK(tun->route_external && tun->peer_count == 2);
        CHECK(tun->peers[0].len == 32 && tun->peers[1].len == 16);
        CHECK(gwsteer_peer_match(dsl, peer_addr("10.200.0.1", &ss)) == 0);
        CHECK(gwsteer_peer_match(tun, peer_addr("10.200.0.1", &ss)) == 32);
        CHECK(gwsteer_peer_match(tun, peer_addr("10.201.255.1", &ss)) == 16);
        CHECK(gwsteer_peer_match(tun, peer_addr("10.202.0.1", &ss)) == -1);
        CHECK(gwsteer_peer_match(tun, peer_addr("fc00:2::1", &ss)) == -1);

        // Longest match wins: the tunnels for the inner address, the
        // unlimited gateway of the family for everything else.
        CHECK(gwsteer_gateways_serving(c, peer_addr("10.200.0.1", &ss))
              == 0x6);
        CHECK(gwsteer_gateways_serving(c, peer_addr("10.201.0.9", &ss))
              == 0x2);
        CHECK(gwsteer_gateways_serving(c, peer_addr("198.51.100.10", &ss))
              == 0x1);
        CHECK(gwsteer_gateways_serving(c, peer_addr("fc00:9::1", &ss))
              == 0x8);
        gwsteer_config_free(c);

        // Only gateways limited to peers, and a peer none of them has.
        struct gwsteer_config *const only = load_text(
                "[gateway t]\nsource = 10.200.1.2\nhops = 10.200.1.1\n"
                "probe = 10.200.0.1\npeers = 10.200.0.0/24\n");

        CHECK(only != NULL);
        if (only == NULL)
                return;
        CHECK(gwsteer_gateways_serving(only, peer_addr("10.200.0.7", &ss))
              == 0x1);
        CHECK(gwsteer_gateways_serving(only, peer_addr("10.9.0.1", &ss))
              == 0);
        gwsteer_config_free(only);
}

/**
 * @brief Bad files are refused.
 */
static void test_config_bad(void)
{
        static char const *const bad[] = {
                "[gateway gw1]\nsource=10.1.1.300\nhops=10.1.1.1\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "[gateway gw1]\nsource=10.1.2.2\nhops=10.1.2.1\n",
                "[gwsteer]\nprobe_intervl_ms=5\n"
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                "[gwsteer]\nprobe_interval_ms=fast\n"
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                "[gwsteer]\newma_alpha=1.5\n"
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1,10.0.0.9\n",
                "[gateway gw1]\nsource=10.1.1.2\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "[gateway gw2]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                "[gateway g w]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                "[gateways]\n",
                "[gwsteer]\nrole=client\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=fc00::1\n",
                // Rounds would be dropped: timeout >= 16 intervals.
                "[gwsteer]\nprobe_interval_ms=10\nprobe_timeout_ms=160\n"
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n",
                // peers: host bits past the length, another family, a
                // length too long, empty, not an address; route: unknown;
                // peers on a proxy, whose gateways open no subflows.
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "peers=10.200.0.1/24\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "peers=fc00::/64\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "peers=10.200.0.0/33\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\npeers=\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "peers=proxy\n",
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "route=openvpn\n",
                "[gwsteer]\nrole=proxy\n"
                "[gateway gw1]\nsource=10.1.1.2\nhops=10.1.1.1\n"
                "peers=10.200.0.1/32\n",
        };

        for (size_t i = 0; i < L_ARRAY_SIZE(bad); ++i) {
                struct gwsteer_config *const c = load_text(bad[i]);

                if (c != NULL)
                        fprintf(stderr, "accepted bad config #%zu\n", i);
                CHECK(c == NULL);
                gwsteer_config_free(c);
        }
}

/// Number of change callbacks seen.
static int changes;

/// Change callback for the health tests.
static void on_change(struct gateway *gw, void *user_data)
{
        (void) gw;
        (void) user_data;
        ++changes;
}

/**
 * @brief Up/down hysteresis and flap damping.
 */
static void test_health_hysteresis(void)
{
        struct gwsteer_config *const c = load_text(good_conf);
        struct gateway_health *const h =
                gateway_health_new_passive(c, on_change, NULL);
        struct gateway *const gw1 = l_queue_peek_head(
                (struct l_queue *) gateway_health_gateways(h));
        uint64_t t = MS(1000);

        CHECK(!gw1->up);

        // First answer: up immediately (discovery, not a flap).
        gateway_health_record(h, gw1, true, MS(10), 1, t);
        CHECK(gw1->up);
        CHECK(gw1->has_rtt && gw1->ewma_ms == 10.0);

        // One loss is noise; fail_after = 2 losses take it down.
        gateway_health_record(h, gw1, false, 0, 2, t += MS(100));
        CHECK(gw1->up);
        gateway_health_record(h, gw1, false, 0, 3, t += MS(100));
        CHECK(!gw1->up);

        // Two answers, but hold_ms (100) not yet elapsed: stays down.
        gateway_health_record(h, gw1, true, MS(20), 4, t += MS(10));
        gateway_health_record(h, gw1, true, MS(20), 5, t += MS(10));
        CHECK(!gw1->up);
        gateway_health_record(h, gw1, true, MS(20), 6, t += MS(100));
        CHECK(gw1->up);
        CHECK(gw1->ewma_ms > 10.0 && gw1->ewma_ms < 20.0);

        // Flap soon after recovery: the hold doubles.
        gateway_health_record(h, gw1, false, 0, 7, t += MS(10));
        gateway_health_record(h, gw1, false, 0, 8, t += MS(10));
        CHECK(!gw1->up);
        CHECK(gw1->flaps == 1);
        gateway_health_record(h, gw1, true, MS(20), 9, t += MS(50));
        gateway_health_record(h, gw1, true, MS(20), 10, t += MS(60));
        CHECK(!gw1->up);  // 110 ms < 200 ms hold
        gateway_health_record(h, gw1, true, MS(20), 11, t += MS(100));
        CHECK(gw1->up);

        gateway_health_destroy(h);
        gwsteer_config_free(c);
}

/**
 * @brief Probe loss over the last 64 probes, reset with the source.
 */
static void test_probe_loss(void)
{
        struct gwsteer_config *const c = load_text(good_conf);
        struct gateway_health *const h =
                gateway_health_new_passive(c, on_change, NULL);
        struct gateway *const gw1 = l_queue_peek_head(
                (struct l_queue *) gateway_health_gateways(h));
        uint64_t t = MS(1000);
        int64_t round = 0;

        CHECK(gateway_probe_loss(gw1) < 0);

        // One in four lost: 0.25 over the first 8, and over a full window.
        for (int i = 0; i < 100; ++i) {
                gateway_health_record(h, gw1, i % 4 != 3, MS(10), ++round,
                                      t += MS(100));
                if (i == 7)
                        CHECK(gateway_probe_loss(gw1) == 0.25);
        }
        CHECK(gw1->probes == 64 && gateway_probe_loss(gw1) == 0.25);

        // The window forgets: 64 answers later, no loss.
        for (int i = 0; i < 64; ++i)
                gateway_health_record(h, gw1, true, MS(10), ++round,
                                      t += MS(100));
        CHECK(gateway_probe_loss(gw1) == 0.0);

        // 64 losses: all of the window.
        for (int i = 0; i < 64; ++i)
                gateway_health_record(h, gw1, false, 0, ++round,
                                      t += MS(100));
        CHECK(gateway_probe_loss(gw1) == 1.0);

        gateway_health_destroy(h);
        gwsteer_config_free(c);
}

/**
 * @brief AvMet preference with switch margin and prefer_best backups.
 */
static void test_health_avmet(void)
{
        struct gwsteer_config *const c = load_text(good_conf);
        c->prefer_best = true;
        c->ewma_alpha = 0.8;  // One win must not beat the margin.

        struct gateway_health *const h =
                gateway_health_new_passive(c, on_change, NULL);
        struct l_queue *const q =
                (struct l_queue *) gateway_health_gateways(h);
        struct gateway *const gw1 = l_queue_peek_head(q);
        struct gateway *const gw2 = l_queue_peek_tail(q);
        uint64_t t = MS(1000);
        int64_t round = 0;

        // gw1 answers first in round 0; gw2 second.
        gateway_health_record(h, gw1, true, MS(5), round, t);
        gateway_health_record(h, gw2, true, MS(9), round, t);
        CHECK(gateway_health_best(h) == gw1);
        CHECK(!gateway_health_is_backup(h, gw1));
        CHECK(gateway_health_is_backup(h, gw2));

        // gw2 wins one round: within the margin, gw1 stays best.
        ++round;
        gateway_health_record(h, gw2, true, MS(4), round, t += MS(100));
        gateway_health_record(h, gw1, true, MS(6), round, t);
        CHECK(gateway_health_best(h) == gw1);

        // gw2 keeps winning: it takes over once ahead by the margin.
        for (int i = 0; i < 6; ++i) {
                ++round;
                gateway_health_record(h, gw2, true, MS(4), round,
                                      t += MS(100));
                gateway_health_record(h, gw1, true, MS(6), round, t);
        }
        CHECK(gateway_health_best(h) == gw2);
        CHECK(gw2->avmet > gw1->avmet + c->switch_margin);
        CHECK(gateway_health_is_backup(h, gw1));

        // Best goes down: the other one takes over at once.
        for (int i = 0; i < 2; ++i)
                gateway_health_record(h, gw2, false, 0, ++round,
                                      t += MS(100));
        CHECK(!gw2->up);
        CHECK(gateway_health_best(h) == gw1);

        gateway_health_destroy(h);
        gwsteer_config_free(c);
}

/**
 * @brief Status file: atomic write, mode 0644, exact field order.
 */
static void test_status_file(void)
{
        struct gwsteer_config *const c = load_text(good_conf);
        struct gateway_health *const h =
                gateway_health_new_passive(c, on_change, NULL);
        struct gateway *const gw1 = l_queue_peek_head(
                (struct l_queue *) gateway_health_gateways(h));
        char *const path = l_strdup_printf("%s/sub/gateways.json", tmpdir);

        gateway_health_record(h, gw1, true, MS(12), 1, MS(1000));
        gw1->subflows = 3;

        umask(077);  // The file must still be world-readable.
        CHECK(status_file_write(path, h));

        struct stat st;
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);

        char buf[2048] = { 0 };
        FILE *const f = fopen(path, "r");
        CHECK(f != NULL);
        if (f) {
                CHECK(fread(buf, 1, sizeof(buf) - 1, f) > 0);
                fclose(f);
        }

        CHECK(strncmp(buf, "{\"version\":1,\"updated\":\"", 24) == 0);
        CHECK(strstr(buf, "{\"id\":\"gw1\",\"source\":\"10.1.1.2\","
                          "\"interface\":\"\","
                          "\"up\":true,\"backup\":false,\"best\":true,"
                          "\"ewma_ms\":12.000,\"rtt_ms\":12.000,"
                          "\"avmet\":0.500,"
                          "\"probe_loss\":0.0000,\"probes\":1,"
                          "\"last_change\":\"") != NULL);
        CHECK(strstr(buf, "\"subflows\":3}") != NULL);
        CHECK(strstr(buf, "{\"id\":\"gw2\",\"source\":\"10.1.0.3\","
                          "\"interface\":\"\","
                          "\"up\":false,\"backup\":false,\"best\":false,"
                          "\"ewma_ms\":null,\"rtt_ms\":null,"
                          "\"avmet\":0.000,"
                          "\"probe_loss\":null,\"probes\":0,") != NULL);

        // Only the status file is left in the directory (renamed tmp).
        char *const ls = l_strdup_printf("test $(ls -A %s/sub | wc -l) = 1",
                                         tmpdir);
        CHECK(system(ls) == 0);
        l_free(ls);

        /*
         * A link planted where the old code put its fixed temporary
         * file (<path>.tmp) must not make root truncate or expose its
         * target.
         */
        char *const victim = l_strdup_printf("%s/victim", tmpdir);
        char *const planted = l_strdup_printf("%s.tmp", path);
        FILE *const v = fopen(victim, "w");
        CHECK(v != NULL);
        if (v) {
                fputs("secret", v);
                fclose(v);
        }
        CHECK(chmod(victim, 0600) == 0);
        CHECK(symlink(victim, planted) == 0);
        CHECK(status_file_write(path, h));
        CHECK(stat(victim, &st) == 0 && st.st_size == 6
              && (st.st_mode & 0777) == 0600);

        // A directory others can write is refused, nothing written.
        char *const open_dir = l_strdup_printf("%s/open", tmpdir);
        char *const open_path = l_strdup_printf("%s/gateways.json", open_dir);
        CHECK(mkdir(open_dir, 0755) == 0 && chmod(open_dir, 0777) == 0);
        CHECK(!status_file_write(open_path, h));
        CHECK(access(open_path, F_OK) != 0);

        l_free(open_path);
        l_free(open_dir);
        l_free(planted);
        l_free(victim);
        l_free(path);
        gateway_health_destroy(h);
        gwsteer_config_free(c);
}

/// Probe reply callback of the matching test (never called there).
static void on_reply(uint16_t seq, void *user_data)
{
        (void) seq;
        (void) user_data;
}

/**
 * @brief Answers count only from the target, with our id and token.
 */
static void test_probe_match(void)
{
        struct sockaddr_storage src, target, other;
        uint8_t req[128];
        uint8_t reply[160] = { 0 };
        uint16_t seq = 0;

        gwsteer_parse_addr("10.1.1.2", &src);
        gwsteer_parse_addr("10.99.0.1", &target);
        gwsteer_parse_addr("10.99.0.66", &other);

        struct gateway_probe *const p =
                gateway_probe_new((struct sockaddr *) &src,
                                  (struct sockaddr *) &target, 0x1234,
                                  on_reply, NULL);
        size_t const n = gateway_probe_build(p, 7, req, sizeof(req));

        CHECK(n == 64);

        // The kernel's answer: IPv4 header, then our message as a reply.
        reply[0] = 0x45;
        memcpy(reply + 20, req, n);
        reply[20] = 0;  // ICMP_ECHOREPLY

        CHECK(gateway_probe_match(p, reply, 20 + n,
                                  (struct sockaddr *) &target, &seq));
        CHECK(seq == 7);

        // Same bytes from anyone else: a forgery.
        CHECK(!gateway_probe_match(p, reply, 20 + n,
                                   (struct sockaddr *) &other, &seq));

        // Right source, but not our token (the old constant payload).
        reply[20 + 8] ^= 0xff;
        CHECK(!gateway_probe_match(p, reply, 20 + n,
                                   (struct sockaddr *) &target, &seq));
        reply[20 + 8] ^= 0xff;

        // Right source and token, another identifier.
        reply[20 + 4] ^= 0x01;
        CHECK(!gateway_probe_match(p, reply, 20 + n,
                                   (struct sockaddr *) &target, &seq));
        reply[20 + 4] ^= 0x01;

        // Truncated before the token.
        CHECK(!gateway_probe_match(p, reply, 20 + 8 + 4,
                                   (struct sockaddr *) &target, &seq));

        // Two probers never share a token.
        struct gateway_probe *const q =
                gateway_probe_new((struct sockaddr *) &src,
                                  (struct sockaddr *) &target, 0x1234,
                                  on_reply, NULL);
        CHECK(!gateway_probe_match(q, reply, 20 + n,
                                   (struct sockaddr *) &target, &seq));

        gateway_probe_destroy(q);
        gateway_probe_destroy(p);
}

/**
 * @brief Read what is queued on @a fd; the ICMP type of the first.
 */
static unsigned int drain(int fd, int *first_type)
{
        uint8_t buf[512];
        unsigned int n = 0;
        ssize_t len;

        *first_type = -1;
        while ((len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
                if (n++ == 0 && len > 20)
                        *first_type = buf[(buf[0] & 0x0f) * 4];
        }

        return n;
}

/**
 * @brief The probe socket as the kernel sees it (root, loopback only).
 *
 * ICMP_FILTER: only echo replies are queued, not the other ICMP the
 * host receives (here our own echo request, seen on lo).  One wake-up
 * reads at most 32 datagrams, so a flood cannot hold the event loop.
 */
static void test_probe_socket(void)
{
        if (geteuid() != 0) {
                printf("test_probe_socket: SKIPPED (raw sockets need root)\n");
                return;
        }

        struct sockaddr_storage lo;
        gwsteer_parse_addr("127.0.0.1", &lo);
        CHECK(l_main_init());

        struct gateway_probe *const p =
                gateway_probe_new((struct sockaddr *) &lo,
                                  (struct sockaddr *) &lo,
                                  (uint16_t) l_getrandom_uint32(),
                                  on_reply, NULL);
        int type = -1;

        CHECK(gateway_probe_send(p, 1));
        usleep(100000);
        CHECK(drain(gateway_probe_fd(p), &type) == 1);
        CHECK(type == 0);  // ICMP_ECHOREPLY; no echo request (8).

        // 40 forged echo replies to the probe's address.
        int const s = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
        uint8_t forged[16] = { 0 };  // type 0, code 0
        uint32_t sum = 0;

        forged[4] = 0x12;  // some identifier, not the prober's token
        for (size_t i = 0; i < sizeof(forged); i += 2)
                sum += (uint32_t) (forged[i] << 8 | forged[i + 1]);
        sum = (sum & 0xffff) + (sum >> 16);
        forged[2] = (uint8_t) (~sum >> 8);
        forged[3] = (uint8_t) ~sum;

        CHECK(s >= 0);
        for (int i = 0; i < 40; ++i)
                CHECK(sendto(s, forged, sizeof(forged), 0,
                             (struct sockaddr *) &lo,
                             sizeof(struct sockaddr_in)) > 0);
        close(s);
        usleep(100000);

        l_main_iterate(100);  // One wake-up of the prober.
        CHECK(drain(gateway_probe_fd(p), &type) == 40 - 32);

        gateway_probe_destroy(p);
        l_main_exit();
}

/**
 * @brief kernel_subflows_walk() callback: print one subflow.
 */
static void print_subflow(struct kernel_subflow const *sf, void *user_data)
{
        char l[INET6_ADDRSTRLEN];
        char r[INET6_ADDRSTRLEN];

        (void) user_data;
        printf("%08x %s %u %s %u id %u flags %#x%s\n", sf->token,
               gwsteer_ntop((struct sockaddr const *) &sf->laddr, l, sizeof(l)),
               ntohs(((struct sockaddr_in const *) &sf->laddr)->sin_port),
               gwsteer_ntop((struct sockaddr const *) &sf->raddr, r, sizeof(r)),
               ntohs(((struct sockaddr_in const *) &sf->raddr)->sin_port),
               sf->local_id, sf->flags,
               kernel_subflow_backup(sf) ? " backup" : "");
}

/**
 * @brief Run all tests, or validate one file.
 */
int main(int argc, char **argv)
{
        l_log_set_stderr();

        if (argc == 2 && strcmp(argv[1], "subflows") == 0)
                return kernel_subflows_walk(print_subflow, NULL) == 0 ? 0 : 1;

        if (mkdtemp(tmpdir) == NULL)
                return 1;

        test_config_good();
        test_config_peers();
        test_config_bad();
        test_health_hysteresis();
        test_health_avmet();
        test_probe_loss();
        test_status_file();
        test_probe_match();
        test_probe_socket();

        char *const cmd = l_strdup_printf("rm -rf %s", tmpdir);
        if (system(cmd) != 0)
                ++failures;
        l_free(cmd);

        printf("test_gwsteer: %s (%d failed checks)\n",
               failures ? "FAIL" : "ok", failures);

        return failures ? 1 : 0;
}
