// SPDX-License-Identifier: GPL-2.0
/*
 * Userspace build of braid's scheduler policy cores, for statistical tests.
 *
 * The kernel includes the same headers (kernel/series-added/net/mptcp/<name>_policy.h);
 * here they get stdint types and a seeded xorshift64* generator in place of
 * get_random_u32(), and are exported for Python (ctypes) to drive.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;

#include "hywf_policy.h"
#include "bernoulli_policy.h"
#include "delaybal_policy.h"
#include "rate_policy.h"

static u64 rng_state = 1;

static u32 xorshift_next(void *ctx)
{
	(void)ctx;
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (u32)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static struct hywf_rand rnd = { .next = xorshift_next };

void harness_seed(u64 seed)
{
	rng_state = seed ? seed : 1;
}

u32 harness_hywf_draw_burst(u32 ncons)
{
	return hywf_draw_burst(ncons, xorshift_next(NULL));
}

u32 harness_hywf_draw_burst_from(u32 ncons, u32 r)
{
	return hywf_draw_burst(ncons, r);
}

u64 harness_hywf_log2(u64 x)
{
	return hywf_log2(x);
}

void harness_hywf_draw_weights(u32 ps_permille, u32 n, u32 *weight)
{
	struct hywf_params p = { .ps_permille = ps_permille, .ncons = 1 };

	hywf_draw_weights(&p, n, &rnd, weight);
}

u32 harness_hywf_pick_path(const u32 *weight, u32 n)
{
	return hywf_pick_path(weight, n, xorshift_next(NULL));
}

bool harness_hywf_idle_expired(u32 now_ms, u32 last_ms, u32 idle_ms)
{
	return hywf_idle_expired(now_ms, last_ms, idle_ms);
}

u32 harness_hywf_next_burst(struct hywf_epoch *e, u32 ps_permille, u32 ncons,
			    u32 n, u32 now_ms, u32 idle_ms, u32 *burst_pkts)
{
	struct hywf_params p = { .ps_permille = ps_permille, .ncons = ncons };

	return hywf_next_burst(e, &p, n, now_ms, idle_ms, NULL, &rnd,
			       burst_pkts);
}

u32 harness_hywf_take_burst(struct hywf_epoch *e, u32 ncons, u32 n,
			    u32 now_ms, u32 idle_ms, u32 *burst_pkts,
			    u32 *piece_seq)
{
	struct hywf_params p = { .ps_permille = 500, .ncons = ncons };

	return hywf_take_burst(e, &p, n, now_ms, idle_ms, NULL, &rnd,
			       burst_pkts, piece_seq);
}

bool harness_hywf_give_back(struct hywf_epoch *e, u32 n, u32 piece_seq,
			    u32 pkts, u32 now_ms, u32 idle_ms)
{
	return hywf_give_back(e, n, piece_seq, pkts, now_ms, idle_ms);
}

u32 harness_hywf_take_back(struct hywf_epoch *e, u32 n, u32 piece_seq,
			   u32 pkts, u32 now_ms, u32 idle_ms)
{
	return hywf_take_back(e, n, piece_seq, pkts, now_ms, idle_ms);
}

u32 harness_hywf_next_burst_drift(struct hywf_epoch *e, struct hywf_drift *d,
				  u32 ncons, u32 nchp, u32 n, u32 now_ms,
				  u32 idle_ms, u32 *burst_pkts)
{
	struct hywf_params p = {
		.ps_permille = 500, .ncons = ncons, .nchp = nchp,
	};

	return hywf_next_burst(e, &p, n, now_ms, idle_ms, d, &rnd, burst_pkts);
}

u32 harness_hywf_drift_size(void)
{
	return sizeof(struct hywf_drift);
}

bool harness_hywf_keep_burst(u32 *last_ms, bool present, bool waiting,
			     u32 drawn_paths, u32 n, int segs_left, u32 now_ms,
			     u32 idle_ms)
{
	return hywf_keep_burst(last_ms, present, waiting, drawn_paths, n,
			       segs_left, now_ms, idle_ms);
}

bool harness_hywf_epoch_touch_due(u32 *touched_ms, u32 now_ms, u32 idle_ms)
{
	return hywf_epoch_touch_due(touched_ms, now_ms, idle_ms);
}

void harness_hywf_epoch_touch(struct hywf_epoch *e, u32 n, u32 now_ms,
			      u32 idle_ms)
{
	hywf_epoch_touch(e, n, now_ms, idle_ms);
}

u32 harness_hywf_epoch_size(void)
{
	return sizeof(struct hywf_epoch);
}

u64 harness_bern_isqrt(u64 x)
{
	return bern_isqrt(x);
}

u32 harness_bern_optimal_weights(const u64 *mu, u32 n, u64 lambda,
				 u32 *weight)
{
	return bern_optimal_weights(mu, n, lambda, weight);
}

void harness_bern_fixed_weights(u32 permille, u32 n, u32 *weight)
{
	bern_fixed_weights(permille, n, weight);
}

u64 harness_bern_ewma(u64 avg, u64 sample, u32 shift)
{
	return bern_ewma(avg, sample, shift);
}

u64 harness_bern_waiting(u64 unacked, u64 rate, u32 owd_us)
{
	return bern_waiting(unacked, rate, owd_us);
}

u32 harness_bern_bounded_pick(const u64 *arrival_us, u32 n, u32 pick,
			      u32 lag_us)
{
	return bern_bounded_pick(arrival_us, n, pick, lag_us);
}

/* Paths from parallel arrays, at most DBAL_MAX_PATHS; returns how many. */
static u32 dbal_paths(struct dbal_path *p, const u64 *queued, const u64 *rate,
		      const u32 *owd_us, u32 n)
{
	u32 i;

	for (i = 0; i < n && i < DBAL_MAX_PATHS; i++) {
		p[i].queued = queued[i];
		p[i].rate = rate[i];
		p[i].owd_us = owd_us[i];
	}
	return i;
}

u32 harness_dbal_earliest(const u64 *queued, const u64 *rate, const u32 *owd_us,
			  u32 n, u32 size, u32 usable)
{
	struct dbal_path p[DBAL_MAX_PATHS];

	return dbal_earliest(p, dbal_paths(p, queued, rate, owd_us, n), size,
			     usable);
}

bool harness_dbal_wait_pays(const u64 *queued, const u64 *rate,
			    const u32 *owd_us, u32 size, u64 pending)
{
	struct dbal_path p[2];

	dbal_paths(p, queued, rate, owd_us, 2);
	return dbal_wait_pays(&p[0], &p[1], size, pending);
}

u64 harness_rate_update(u64 *max, u32 *stamp_ms, u64 sample, u64 guess,
			u32 now_ms)
{
	struct rate_est est = { .max = *max, .stamp_ms = *stamp_ms };
	u64 rate = rate_update(&est, sample, guess, now_ms);

	*max = est.max;
	*stamp_ms = est.stamp_ms;
	return rate;
}
