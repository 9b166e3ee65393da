/* SPDX-License-Identifier: GPL-2.0 */
/*
 * HyWF decision core: pure integer logic shared by the kernel scheduler
 * (sched_hywf.c) and braid's userspace test harness.
 *
 * It includes no headers: the includer provides u8/u32/u64 and bool. All
 * randomness comes through struct hywf_rand so that the harness can replay a
 * fixed seed and check the distributions statistically.
 *
 * Split weights are fixed point with HYWF_ONE == 1.0. For two paths the
 * weight of the first path is p ~ U[c - h, c + h] with c = ps and
 * h = min(c, 1 - c): for ps <= 0.5 that is HyWF's U[0, 2 * ps], the biased
 * split that favours a cheap second network; ps = 0.5 gives U[0, 1]. For
 * three or more paths the weights are uniform on the simplex (spacings of
 * sorted uniforms) and ps is not used.
 *
 * Burst lengths are geometric with mean ncons packets and support >= 1:
 * each further packet continues the burst with probability 1 - 1/ncons.
 */
#ifndef __MPTCP_HYWF_POLICY_H
#define __MPTCP_HYWF_POLICY_H

#define HYWF_ONE_SHIFT		16
#define HYWF_ONE		0x10000U	/* 1.0, i.e. 1 << HYWF_ONE_SHIFT */
#define HYWF_PERMILLE		1000U
#define HYWF_MAX_PATHS		8
/* Truncate the geometric tail: P(L > 64 * ncons) = e^-64, never in practice. */
#define HYWF_BURST_MAX_FACTOR	64

/**
 * struct hywf_rand - injectable source of uniform 32-bit random numbers
 * @next: returns the next random value
 * @ctx: opaque state passed to @next
 */
struct hywf_rand {
	u32 (*next)(void *ctx);
	void *ctx;
};

/**
 * struct hywf_params - tunables, validated by the sysctl layer
 * @ps_permille: centre of the first path's split range, 0..1000
 * @ncons: mean burst length in packets, >= 1
 */
struct hywf_params {
	u32 ps_permille;
	u32 ncons;
};

/* Uniform integer in [lo, hi] from one 32-bit draw (multiply-shift). */
static inline u32 hywf_uniform(u32 r, u32 lo, u32 hi)
{
	return lo + (u32)(((u64)r * ((u64)hi - lo + 1)) >> 32);
}

/* First path's weight for two paths: U[c - h, c + h], see file comment. */
static inline u32 hywf_draw_two(u32 ps_permille, u32 r)
{
	u32 c = (u32)(((u64)ps_permille << HYWF_ONE_SHIFT) / HYWF_PERMILLE);
	u32 h = c < HYWF_ONE - c ? c : HYWF_ONE - c;

	return hywf_uniform(r, c - h, c + h);
}

/*
 * Weights uniform on the simplex: the spacings of n - 1 sorted uniforms on
 * [0, HYWF_ONE]. Insertion sort is fine for at most HYWF_MAX_PATHS points.
 */
static inline void hywf_draw_simplex(u32 n, struct hywf_rand *rnd, u32 *weight)
{
	u32 cut[HYWF_MAX_PATHS + 1];
	u32 i, j, v;

	cut[0] = 0;
	for (i = 1; i < n; i++) {
		v = hywf_uniform(rnd->next(rnd->ctx), 0, HYWF_ONE);
		for (j = i; j > 1 && cut[j - 1] > v; j--)
			cut[j] = cut[j - 1];
		cut[j] = v;
	}
	cut[n] = HYWF_ONE;
	for (i = 0; i < n; i++)
		weight[i] = cut[i + 1] - cut[i];
}

/**
 * hywf_draw_weights - draw a new split for a page load
 * @p: parameters
 * @n: number of paths, 1..HYWF_MAX_PATHS
 * @rnd: random source
 * @weight: out, @n weights summing to HYWF_ONE
 */
static inline void hywf_draw_weights(const struct hywf_params *p, u32 n,
				     struct hywf_rand *rnd, u32 *weight)
{
	if (n <= 1) {
		weight[0] = HYWF_ONE;
	} else if (n == 2) {
		weight[0] = hywf_draw_two(p->ps_permille, rnd->next(rnd->ctx));
		weight[1] = HYWF_ONE - weight[0];
	} else {
		hywf_draw_simplex(n, rnd, weight);
	}
}

/**
 * hywf_pick_path - choose the path of the next burst
 * @weight: split weights summing to HYWF_ONE
 * @n: number of paths
 * @r: one uniform 32-bit draw
 *
 * Return: index of the path, in [0, @n).
 */
static inline u32 hywf_pick_path(const u32 *weight, u32 n, u32 r)
{
	u32 x = (u32)(((u64)r * HYWF_ONE) >> 32);
	u32 i, acc = 0;

	for (i = 0; i + 1 < n; i++) {
		acc += weight[i];
		if (x < acc)
			return i;
	}
	return n - 1;
}

/**
 * hywf_draw_burst - length of the next burst, in packets
 * @ncons: mean burst length, >= 1
 * @rnd: random source
 *
 * Geometric with mean @ncons: every packet after the first continues the
 * burst with probability 1 - 1/@ncons. One random draw per packet.
 */
static inline u32 hywf_draw_burst(u32 ncons, struct hywf_rand *rnd)
{
	u32 len = 1, max = ncons * HYWF_BURST_MAX_FACTOR;
	/* a draw below stop ends the burst: P = stop / 2^32 = 1 / ncons */
	u64 stop = (1ULL << 32) / (ncons ? ncons : 1);

	while (len < max && rnd->next(rnd->ctx) >= stop)
		len++;
	return len;
}

/**
 * hywf_idle_expired - has the connection been idle long enough to redraw?
 * @now_ms: current time, wrapping milliseconds
 * @last_ms: time of the last scheduling decision
 * @idle_ms: threshold
 *
 * A long-lived connection (Tor, HTTP keep-alive) carries many page loads;
 * one split for all of them would let an observer learn it. A pause longer
 * than @idle_ms is taken as the start of a new page load.
 */
static inline bool hywf_idle_expired(u32 now_ms, u32 last_ms, u32 idle_ms)
{
	return (u32)(now_ms - last_ms) > idle_ms;
}

/**
 * struct hywf_conn - per-connection decision state
 * @weight: current split, one weight per path, summing to HYWF_ONE
 * @last_ms: time of the last decision, for idle detection
 * @draws: number of splits drawn so far (observable by tests)
 * @nr_paths: number of paths @weight was drawn for; 0 before the first draw
 */
struct hywf_conn {
	u32 weight[HYWF_MAX_PATHS];
	u32 last_ms;
	u32 draws;
	u8 nr_paths;
};

/**
 * hywf_note_activity - record that the connection sent at @now_ms
 * @c: connection state
 * @now_ms: current time, wrapping milliseconds
 */
static inline void hywf_note_activity(struct hywf_conn *c, u32 now_ms)
{
	c->last_ms = now_ms;
}

/**
 * hywf_keep_burst - may the current burst go on?
 * @c: connection state
 * @n: number of usable paths now
 * @path: the burst's path
 * @bytes_left: what is left of the burst
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 *
 * A burst goes on while it has bytes left and its path is still there;
 * an idle gap ends it even with bytes left, so that the next page load
 * starts with a new split rather than the tail of the previous one.
 *
 * Return: true if the burst goes on (the activity is then recorded).
 */
static inline bool hywf_keep_burst(struct hywf_conn *c, u32 n, u32 path,
				   int bytes_left, u32 now_ms, u32 idle_ms)
{
	if (bytes_left <= 0 || path >= n || n != c->nr_paths ||
	    hywf_idle_expired(now_ms, c->last_ms, idle_ms))
		return false;
	hywf_note_activity(c, now_ms);
	return true;
}

/**
 * hywf_next_burst - decide the path and length of the next burst
 * @c: connection state
 * @p: parameters
 * @n: number of usable paths now, >= 1
 * @now_ms: current time, wrapping milliseconds
 * @idle_ms: idle gap that starts a new page load
 * @rnd: random source
 * @burst_pkts: out, length of the burst in packets
 *
 * A new split is drawn on the first burst, after an idle gap (a new page
 * load) and when the number of paths changes (a subflow joined or died).
 *
 * Return: index of the path for the burst, in [0, @n).
 */
static inline u32 hywf_next_burst(struct hywf_conn *c,
				  const struct hywf_params *p, u32 n,
				  u32 now_ms, u32 idle_ms,
				  struct hywf_rand *rnd, u32 *burst_pkts)
{
	if (n > HYWF_MAX_PATHS)
		n = HYWF_MAX_PATHS;
	if (n < 1)
		n = 1;
	if (c->nr_paths != n || hywf_idle_expired(now_ms, c->last_ms, idle_ms)) {
		hywf_draw_weights(p, n, rnd, c->weight);
		c->nr_paths = n;
		c->draws++;
	}
	hywf_note_activity(c, now_ms);
	*burst_pkts = hywf_draw_burst(p->ncons, rnd);
	return hywf_pick_path(c->weight, n, rnd->next(rnd->ctx));
}

#endif /* __MPTCP_HYWF_POLICY_H */
