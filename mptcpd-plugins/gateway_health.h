// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file gateway_health.h
 *
 * @brief Gateway health: probes, EWMAs, hysteresis and preference.
 */

#ifndef GWSTEER_GATEWAY_HEALTH_H
#define GWSTEER_GATEWAY_HEALTH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct l_queue;
struct sockaddr;
struct gateway_spec;
struct gwsteer_config;
struct gateway_health;

/**
 * @struct gateway
 *
 * @brief Run-time state of one gateway.
 *
 * Owned by the gateway_health object; the plugin reads it and keeps
 * only @c subflows up to date.
 */
struct gateway
{
        /// Validated configuration of this gateway.
        struct gateway_spec const *spec;

        /// Position in the configuration (bit in per-connection masks).
        unsigned int index;

        /**
         * @brief Current source address, or @c AF_UNSPEC if none.
         *
         * The configured source, or the address its interface has now
         * (gateway_health_set_source()).
         */
        struct sockaddr_storage source;

        /// Index of the interface it follows while present, else 0.
        int ifindex;

        /// Whether subflows may use this gateway.
        bool up;

        /// Whether the gateway was ever up (first answer: no hysteresis).
        bool ever_up;

        /// Whether it came back after a failure (flaps can be counted).
        bool recovered;

        /// Whether at least one probe was answered (RTT fields valid).
        bool has_rtt;

        /// Last measured probe round-trip time, in milliseconds.
        double rtt_ms;

        /// EWMA of the probe round-trip time, in milliseconds.
        double ewma_ms;

        /**
         * @brief AvMet preference score in [0, 1].
         *
         * EWMA of "this gateway answered a probe round first": the
         * N-gateway form of AvMet's @c curbest (Rao, MIT 2005).
         */
        double avmet;

        /// Consecutive answered probes.
        unsigned int ok_run;

        /// Consecutive lost probes.
        unsigned int lost_run;

        /**
         * @brief The last probes' outcomes, newest in bit 0 (1 = lost).
         *
         * A window of up to 64 probes (@c probes of them valid): the
         * loss rate an operator sees, where @c lost_run only drives the
         * up/down hysteresis.
         */
        uint64_t loss_bits;

        /// Valid bits in @c loss_bits (at most 64).
        unsigned int probes;

        /// Recent flaps; the down hold time is hold_ms << flaps.
        unsigned int flaps;

        /// Monotonic time of the last up/down change, microseconds.
        uint64_t last_change_us;

        /// Wall-clock time of the last up/down change.
        struct timespec last_change;

        /// Live subflows through this gateway, over all connections.
        unsigned int subflows;
};

/**
 * @brief Fraction of the last probes (up to 64) that were lost.
 *
 * @return A value in [0, 1], or a negative value if no probe has been
 *         recorded since the gateway started or changed its source.
 */
double gateway_probe_loss(struct gateway const *gw);

/**
 * @brief Called when a gateway changes state or the best one changes.
 *
 * @param[in] gw        Gateway that went up or down, or @c NULL if
 *                      only the preference (best gateway) changed.
 * @param[in] user_data Pointer given to gateway_health_new().
 */
typedef void (*gateway_health_change_cb)(struct gateway *gw,
                                         void *user_data);

/**
 * @brief Start probing every configured gateway.
 *
 * @param[in] config    Validated configuration; must outlive the
 *                      returned object.
 * @param[in] on_change Change notification callback.
 * @param[in] user_data Passed to @a on_change.
 *
 * @return The health tracker, or @c NULL on failure.
 */
struct gateway_health *
gateway_health_new(struct gwsteer_config const *config,
                   gateway_health_change_cb on_change,
                   void *user_data);

/**
 * @brief Stop probing and free every gateway.
 */
void gateway_health_destroy(struct gateway_health *h);

/**
 * @brief Gateways in configuration order (struct gateway *).
 */
struct l_queue const *gateway_health_gateways(
        struct gateway_health const *h);

/**
 * @brief Gateway whose source is the IP of @a sa (port ignored).
 *
 * @return The gateway or @c NULL.
 */
struct gateway *gateway_health_find(struct gateway_health const *h,
                                    struct sockaddr const *sa);

/**
 * @brief Move gateway @a gw to a new source address, or to none.
 *
 * In-flight probes are forgotten and later ones leave from @a source.
 * With @a source @c NULL (its interface went away or lost its
 * address) the gateway goes down at once, without waiting for lost
 * probes; with a new address it keeps its state (the path behind the
 * interface is the same until probes say otherwise) and a gateway that
 * is down comes back after the usual recover_after answers.
 *
 * @return @c true if the source changed (the change callback runs).
 */
bool gateway_health_set_source(struct gateway_health *h,
                               struct gateway *gw,
                               struct sockaddr const *source);

/**
 * @brief Passive failure signal: probe @a gw now, out of cycle.
 *
 * Subflow closures and subflow set-up timeouts are hints, not
 * verdicts (mptcpd 0.12 does not pass the error code), so they only
 * shorten the time to the next probe; the probes decide.
 */
void gateway_health_suspect(struct gateway_health *h, struct gateway *gw);

/**
 * @brief Whether subflows through @a gw should carry the backup flag.
 *
 * Configured backup gateways always do; with @c prefer_best every
 * gateway but the current best does too.
 */
bool gateway_health_is_backup(struct gateway_health const *h,
                              struct gateway const *gw);

/**
 * @brief gateway_health_is_backup() with @a best as the preferred
 *        gateway: a connection's own best among the gateways that
 *        serve its peer.
 */
bool gateway_health_is_backup_beside(struct gateway_health const *h,
                                     struct gateway const *gw,
                                     struct gateway const *best);

/**
 * @brief Currently preferred gateway, or @c NULL if none is usable.
 */
struct gateway const *gateway_health_best(struct gateway_health const *h);

/**
 * @brief Elect a best gateway among some: @a cur, or a challenger.
 *
 * Candidates are up, not configured backup, and in @a among (bit =
 * index).  The one with the highest AvMet score (then the lowest RTT
 * EWMA) replaces @a cur when @a cur is no candidate, or when it leads
 * @a cur by switch_margin: scores that cross back and forth do not
 * move the preference each time.
 *
 * @return The elected gateway, or @c NULL if there is no candidate.
 */
struct gateway *gateway_health_choose_best(struct gateway_health const *h,
                                           uint32_t among,
                                           struct gateway const *cur);

/**
 * @brief Feed one probe outcome (unit tests and the probe code).
 *
 * @param[in] h        Health tracker.
 * @param[in] gw       Gateway probed.
 * @param[in] answered Whether the probe was answered.
 * @param[in] rtt_us   Round-trip time if answered.
 * @param[in] round    Probe round, or -1 for an out-of-cycle probe
 *                     (which does not take part in the AvMet race).
 * @param[in] now_us   Current monotonic time.
 */
void gateway_health_record(struct gateway_health *h,
                           struct gateway *gw,
                           bool answered,
                           uint64_t rtt_us,
                           int64_t round,
                           uint64_t now_us);

/**
 * @brief Create a tracker that sends no probes (unit tests).
 */
struct gateway_health *
gateway_health_new_passive(struct gwsteer_config const *config,
                           gateway_health_change_cb on_change,
                           void *user_data);

#endif  // GWSTEER_GATEWAY_HEALTH_H
