// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_health.c
 *
 * @brief Gateway health: probes, EWMAs, hysteresis and preference.
 *
 * Every probe_interval_ms one probe "round" r is sent: an ICMP echo
 * from each gateway's source address, so through that gateway.  Per
 * gateway g, with history weight a = ewma_alpha:
 *
 *   answered:  rtt_g = sample;  ewma_g = a*ewma_g + (1-a)*sample
 *              ok_run++, lost_run = 0
 *   lost:      (no answer within probe_timeout_ms) lost_run++, ok_run = 0
 *
 * AvMet, generalised to N gateways: the first answer of round r wins
 * the round and every gateway's score moves towards its indicator:
 *
 *   avmet_g = a*avmet_g + (1-a)*[g won round r]
 *
 * Rao's AvMet (MIT 2005) kept one float for two links and raced real
 * connections; our rounds race cheap probes instead, so the score is
 * updated every interval and a gateway that is a little faster but
 * always faster ends up near 1, one that is jittery but sometimes
 * fastest somewhere in between.
 *
 * State machine (hysteresis so that a flapping gateway does not churn
 * subflows):
 *
 *   DOWN --[first ever answer]--------------------------------> UP
 *   DOWN --[recover_after answers in a row and down >= hold]--> UP
 *   UP   --[fail_after losses in a row]-----------------------> DOWN
 *
 * hold = hold_ms << flaps, where flaps counts downs that came less
 * than 4*hold after the previous up (capped at 4, i.e. 16x), and
 * resets after a stable period.  Failing is fast on purpose: a dead
 * gateway's subflows stall the connection's scheduler, a spare subflow
 * costs little.
 *
 * Preference: the best gateway is the up, non-backup one with the
 * highest AvMet score; a challenger replaces it only when it beats it
 * by switch_margin, so two equally good gateways do not swap roles
 * every round.
 */

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ell/ell.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "gateway_probe.h"

/// Out-of-cycle probes in flight per gateway, at most.
#define EXTRA_SLOTS 4

/**
 * @brief Probes in flight per gateway.
 *
 * The configuration keeps probe_timeout_ms below GWSTEER_ROUND_SLOTS
 * intervals, so rounds always find a slot; out-of-cycle probes get
 * the few extra ones and never take a round's.
 */
#define PROBE_SLOTS (GWSTEER_ROUND_SLOTS + EXTRA_SLOTS)

/// Sequence numbers with this bit set are out-of-cycle probes.
#define PROBE_SEQ_EXTRA 0x8000

/// Largest flap exponent: hold grows to at most hold_ms << 4.
#define MAX_FLAPS 4

/**
 * @struct probe_slot
 *
 * @brief One probe awaiting its answer.
 */
struct probe_slot
{
        /// Slot holds a probe in flight.
        bool used;

        /// Sequence number sent.
        uint16_t seq;

        /// Round number, or -1 for out-of-cycle probes.
        int64_t round;

        /// Monotonic send time, microseconds.
        uint64_t sent_us;
};

/**
 * @struct gateway_entry
 *
 * @brief A gateway plus what only the health tracker needs.
 *
 * @c gw comes first so that a struct gateway pointer handed to the
 * plugin converts back to its entry.
 */
struct gateway_entry
{
        /// Public state.
        struct gateway gw;

        /// Owning tracker.
        struct gateway_health *health;

        /// Prober (NULL for the passive unit-test tracker).
        struct gateway_probe *probe;

        /// Probes in flight.
        struct probe_slot slots[PROBE_SLOTS];

        /// Counter for out-of-cycle probe sequence numbers.
        uint16_t extra_seq;

        /// Monotonic time of the last out-of-cycle probe.
        uint64_t last_extra_us;
};

/**
 * @struct gateway_health
 *
 * @brief Health tracker: all gateways and the probe timer.
 */
struct gateway_health
{
        /// Configuration (not owned).
        struct gwsteer_config const *config;

        /// struct gateway_entry *, configuration order.
        struct l_queue *gateways;

        /// Probe round timer.
        struct l_timeout *timer;

        /// Current probe round.
        int64_t round;

        /// Last round whose winner updated the AvMet scores.
        int64_t last_scored_round;

        /// Monotonic time at which the next round is due.
        uint64_t next_round_us;

        /// Preferred gateway or NULL.
        struct gateway *best;

        /// Change callback.
        gateway_health_change_cb on_change;

        /// Passed to @c on_change.
        void *user_data;
};

/**
 * @brief Current down hold time of a gateway, microseconds.
 */
static uint64_t hold_us(struct gateway_health const *h,
                        struct gateway const *gw)
{
        return ((uint64_t) h->config->hold_ms << gw->flaps) * 1000;
}

/**
 * @brief Record an up/down transition and its time.
 */
static void set_state(struct gateway_health *h,
                      struct gateway *gw,
                      bool up,
                      uint64_t now_us)
{
        if (!up) {
                /*
                 * Flap damping: going down soon after coming up means
                 * the gateway is unstable; make it wait longer next
                 * time.  A long stable period forgives.
                 */
                uint64_t const uptime = now_us - gw->last_change_us;

                if (gw->recovered && uptime < 4 * hold_us(h, gw)) {
                        if (gw->flaps < MAX_FLAPS)
                                ++gw->flaps;
                } else if (uptime > 16 * hold_us(h, gw)) {
                        gw->flaps = 0;
                }
        }

        gw->recovered |= up && gw->ever_up;
        gw->up = up;
        gw->ever_up |= up;
        gw->last_change_us = now_us;
        clock_gettime(CLOCK_REALTIME, &gw->last_change);

        l_info("gateway %s is %s (rtt %.1f ms, ewma %.1f ms, hold %u ms)",
               gw->spec->id, up ? "up" : "down", gw->rtt_ms, gw->ewma_ms,
               (unsigned int) (hold_us(h, gw) / 1000));
}

struct gateway *gateway_health_choose_best(struct gateway_health const *h,
                                           uint32_t among,
                                           struct gateway const *cur)
{
        struct gateway *top = NULL;

        for (struct l_queue_entry const *e = l_queue_get_entries(h->gateways);
             e;
             e = e->next) {
                struct gateway *const gw = e->data;

                if (!gw->up || gw->spec->backup
                    || !(among & (1u << gw->index)))
                        continue;

                if (top == NULL || gw->avmet > top->avmet
                    || (gw->avmet == top->avmet && gw->ewma_ms < top->ewma_ms))
                        top = gw;
        }

        if (cur == NULL || !cur->up || !(among & (1u << cur->index)))
                return top;
        if (top != NULL && top != cur
            && top->avmet > cur->avmet + h->config->switch_margin)
                return top;

        return (struct gateway *) cur;
}

/**
 * @brief Re-elect the best gateway; report a change.
 *
 * @return @c true if the best gateway changed.
 */
static bool update_best(struct gateway_health *h)
{
        struct gateway *const cur = h->best;
        struct gateway *const next =
                gateway_health_choose_best(h, UINT32_MAX, cur);

        if (next == cur)
                return false;

        h->best = next;
        l_info("best gateway: %s", next ? next->spec->id : "(none)");

        return true;
}

double gateway_probe_loss(struct gateway const *gw)
{
        if (gw->probes == 0)
                return -1;

        uint64_t const window = gw->probes == 64
                ? UINT64_MAX
                : (UINT64_C(1) << gw->probes) - 1;

        return (double) __builtin_popcountll(gw->loss_bits & window)
                / gw->probes;
}

void gateway_health_record(struct gateway_health *h,
                           struct gateway *gw,
                           bool answered,
                           uint64_t rtt_us,
                           int64_t round,
                           uint64_t now_us)
{
        struct gwsteer_config const *const c = h->config;
        bool changed = false;

        gw->loss_bits = gw->loss_bits << 1 | (answered ? 0 : 1);
        if (gw->probes < 64)
                ++gw->probes;

        if (answered) {
                double const sample = (double) rtt_us / 1000.0;

                gw->rtt_ms = sample;
                gw->ewma_ms = gw->has_rtt
                        ? c->ewma_alpha * gw->ewma_ms
                          + (1 - c->ewma_alpha) * sample
                        : sample;
                gw->has_rtt = true;
                ++gw->ok_run;
                gw->lost_run = 0;

                // First answer of this round: AvMet race winner.
                if (round >= 0 && round > h->last_scored_round) {
                        h->last_scored_round = round;

                        for (struct l_queue_entry const *e =
                                     l_queue_get_entries(h->gateways);
                             e;
                             e = e->next) {
                                struct gateway *const g = e->data;

                                g->avmet = c->ewma_alpha * g->avmet
                                        + (1 - c->ewma_alpha)
                                          * (g == gw ? 1.0 : 0.0);
                        }
                }

                if (!gw->up
                    && (!gw->ever_up
                        || (gw->ok_run >= c->recover_after
                            && now_us - gw->last_change_us
                               >= hold_us(h, gw)))) {
                        set_state(h, gw, true, now_us);
                        changed = true;
                }
        } else {
                ++gw->lost_run;
                gw->ok_run = 0;

                if (gw->up && gw->lost_run >= c->fail_after) {
                        set_state(h, gw, false, now_us);
                        changed = true;
                }
        }

        bool const best_changed = update_best(h);

        if (changed)
                h->on_change(gw, h->user_data);
        else if (best_changed)
                h->on_change(NULL, h->user_data);
}

/**
 * @brief Echo reply handler: match it to its slot and record it.
 */
static void on_probe_reply(uint16_t seq, void *user_data)
{
        struct gateway_entry *const entry = user_data;
        uint64_t const now = l_time_now();

        for (size_t i = 0; i < PROBE_SLOTS; ++i) {
                struct probe_slot *const slot = &entry->slots[i];

                if (!slot->used || slot->seq != seq)
                        continue;

                slot->used = false;
                gateway_health_record(entry->health, &entry->gw, true,
                                      now - slot->sent_us, slot->round, now);
                return;
        }
        // Late reply to a probe already counted as lost: ignore.
}

/**
 * @brief Send one probe and remember it in a free slot.
 */
static void send_probe(struct gateway_entry *entry,
                       uint16_t seq,
                       int64_t round,
                       uint64_t now_us)
{
        struct probe_slot *slot = NULL;
        unsigned int extras = 0;

        for (size_t i = 0; i < PROBE_SLOTS; ++i) {
                if (!entry->slots[i].used) {
                        if (slot == NULL)
                                slot = &entry->slots[i];
                } else {
                        extras += entry->slots[i].round < 0;
                }
        }

        if (round < 0 && extras >= EXTRA_SLOTS)
                return;  // Enough hints in flight already.

        // No address (interface away): down already, nothing to probe.
        if (entry->gw.source.ss_family == AF_UNSPEC)
                return;

        if (slot == NULL) {
                // Cannot happen with a validated configuration.
                l_error("gateway %s: no probe slot free, round %lld lost",
                        entry->gw.spec->id, (long long) round);
                return;
        }

        if (!gateway_probe_send(entry->probe, seq)) {
                gateway_health_record(entry->health, &entry->gw, false, 0,
                                      round, now_us);
                return;
        }

        *slot = (struct probe_slot) {
                .used = true,
                .seq = seq,
                .round = round,
                .sent_us = now_us,
        };
}

/**
 * @brief Count probes older than probe_timeout_ms as lost.
 */
static void expire_probes(struct gateway_entry *entry, uint64_t now_us)
{
        uint64_t const timeout =
                (uint64_t) entry->health->config->probe_timeout_ms * 1000;

        for (size_t i = 0; i < PROBE_SLOTS; ++i) {
                struct probe_slot *const slot = &entry->slots[i];

                if (slot->used && now_us - slot->sent_us >= timeout) {
                        slot->used = false;
                        gateway_health_record(entry->health, &entry->gw,
                                              false, 0, slot->round, now_us);
                }
        }
}

/**
 * @brief Probe timer: close out old probes, send the next round.
 *
 * The timer ticks at a quarter of the interval (at most 50 ms) so that
 * a lost probe is noticed close to its timeout, not up to one interval
 * later.
 */
static void on_probe_timer(struct l_timeout *timeout, void *user_data)
{
        struct gateway_health *const h = user_data;
        uint64_t const now = l_time_now();
        unsigned int const interval = h->config->probe_interval_ms;
        unsigned int const tick = interval / 4 < 50 ? interval / 4 + 1 : 50;

        for (struct l_queue_entry const *e = l_queue_get_entries(h->gateways);
             e;
             e = e->next)
                expire_probes(e->data, now);

        if (now >= h->next_round_us) {
                h->next_round_us = now + (uint64_t) interval * 1000;
                ++h->round;

                for (struct l_queue_entry const *e =
                             l_queue_get_entries(h->gateways);
                     e;
                     e = e->next)
                        send_probe(e->data,
                                   (uint16_t) (h->round & 0x7fff),
                                   h->round, now);
        }

        l_timeout_modify_ms(timeout, tick);
}

/**
 * @brief Free one gateway entry.
 */
static void gateway_entry_destroy(void *data)
{
        struct gateway_entry *const entry = data;

        gateway_probe_destroy(entry->probe);
        l_free(entry);
}

/**
 * @brief Build the tracker; @a probing selects real probes.
 */
static struct gateway_health *health_new(struct gwsteer_config const *config,
                                         gateway_health_change_cb on_change,
                                         void *user_data,
                                         bool probing)
{
        struct gateway_health *const h = l_new(struct gateway_health, 1);
        uint64_t const now = l_time_now();
        unsigned int index = 0;

        h->config = config;
        h->gateways = l_queue_new();
        h->on_change = on_change;
        h->user_data = user_data;
        h->last_scored_round = -1;

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(config->gateways);
             e;
             e = e->next) {
                struct gateway_entry *const entry =
                        l_new(struct gateway_entry, 1);
                struct gateway_spec const *const spec = e->data;

                entry->gw.spec = spec;
                entry->gw.index = index++;
                entry->gw.source = spec->source;
                entry->gw.last_change_us = now;
                clock_gettime(CLOCK_REALTIME, &entry->gw.last_change);
                entry->health = h;

                if (probing)
                        entry->probe = gateway_probe_new(
                                (struct sockaddr const *) &spec->source,
                                (struct sockaddr const *) &spec->probe,
                                // Random: not guessable off path.
                                (uint16_t) l_getrandom_uint32(),
                                on_probe_reply,
                                entry);

                l_queue_push_tail(h->gateways, entry);
        }

        // First round right away: gateways come up within one RTT.
        if (probing && !l_queue_isempty(h->gateways))
                h->timer = l_timeout_create_ms(1, on_probe_timer, h, NULL);

        return h;
}

struct gateway_health *
gateway_health_new(struct gwsteer_config const *config,
                   gateway_health_change_cb on_change,
                   void *user_data)
{
        return health_new(config, on_change, user_data, true);
}

struct gateway_health *
gateway_health_new_passive(struct gwsteer_config const *config,
                           gateway_health_change_cb on_change,
                           void *user_data)
{
        return health_new(config, on_change, user_data, false);
}

void gateway_health_destroy(struct gateway_health *h)
{
        if (h == NULL)
                return;

        l_timeout_remove(h->timer);
        l_queue_destroy(h->gateways, gateway_entry_destroy);
        l_free(h);
}

struct l_queue const *gateway_health_gateways(struct gateway_health const *h)
{
        return h->gateways;
}

struct gateway *gateway_health_find(struct gateway_health const *h,
                                    struct sockaddr const *sa)
{
        for (struct l_queue_entry const *e = l_queue_get_entries(h->gateways);
             e;
             e = e->next) {
                struct gateway *const gw = e->data;

                if (gwsteer_same_ip((struct sockaddr const *) &gw->source,
                                    sa))
                        return gw;
        }

        return NULL;
}

bool gateway_health_set_source(struct gateway_health *h,
                               struct gateway *gw,
                               struct sockaddr const *source)
{
        struct gateway_entry *const entry = (struct gateway_entry *) gw;
        uint64_t const now = l_time_now();
        char buf[INET6_ADDRSTRLEN];

        if (source == NULL ? gw->source.ss_family == AF_UNSPEC
            : gwsteer_same_ip((struct sockaddr const *) &gw->source, source))
                return false;

        memset(&gw->source, 0, sizeof(gw->source));
        if (source != NULL)
                memcpy(&gw->source, source, source->sa_family == AF_INET
                       ? sizeof(struct sockaddr_in)
                       : sizeof(struct sockaddr_in6));

        // Answers to probes from the old address prove nothing now.
        memset(entry->slots, 0, sizeof(entry->slots));
        gw->ok_run = 0;
        gw->lost_run = 0;
        gw->loss_bits = 0;
        gw->probes = 0;

        if (entry->probe != NULL)
                gateway_probe_set_source(entry->probe, source);

        l_info("gateway %s: source %s", gw->spec->id,
               source == NULL ? "(none)"
               : gwsteer_ntop(source, buf, sizeof(buf)));

        if (source == NULL && gw->up)
                set_state(h, gw, false, now);

        (void) update_best(h);
        h->on_change(gw, h->user_data);

        return true;
}

void gateway_health_suspect(struct gateway_health *h, struct gateway *gw)
{
        struct gateway_entry *const entry = (struct gateway_entry *) gw;
        uint64_t const now = l_time_now();

        // At most one extra probe per quarter interval: no storms.
        if (entry->probe == NULL
            || now - entry->last_extra_us
               < (uint64_t) h->config->probe_interval_ms * 250)
                return;

        entry->last_extra_us = now;
        send_probe(entry,
                   (uint16_t) (PROBE_SEQ_EXTRA | (entry->extra_seq++ & 0x7fff)),
                   -1, now);
}

bool gateway_health_is_backup_beside(struct gateway_health const *h,
                                     struct gateway const *gw,
                                     struct gateway const *best)
{
        if (gw->spec->backup)
                return true;

        return h->config->prefer_best && best != NULL && gw != best;
}

bool gateway_health_is_backup(struct gateway_health const *h,
                              struct gateway const *gw)
{
        return gateway_health_is_backup_beside(h, gw, h->best);
}

struct gateway const *gateway_health_best(struct gateway_health const *h)
{
        return h->best;
}
