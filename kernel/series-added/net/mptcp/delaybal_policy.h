/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Earliest-arrival choice (PluriBus's minimum-delay path selection), decision
 * core: pure integer logic shared by the kernel scheduler
 * (sched_delaybal.c) and braid's userspace test harness. It includes no
 * headers: the includer provides u32/u64.
 *
 * The next data should take the path on which it arrives first:
 *
 *   arrival_i = (queued_i + size) / rate_i + owd_i
 *
 * queued_i: bytes the subflow has not had acknowledged yet (in flight, or
 * waiting in its send queue); rate_i: what it delivers, bytes per second;
 * owd_i: its one-way propagation delay. A queue-only choice (upstream's
 * default scheduler, which looks at how much room each subflow has) sends
 * on a slow, long path as soon as it has room; this one only when its
 * queue is short enough for the data to arrive there first.
 */
#ifndef __MPTCP_DELAYBAL_POLICY_H
#define __MPTCP_DELAYBAL_POLICY_H

#define DBAL_MAX_PATHS		8

#ifndef dbal_div_u64
#define dbal_div_u64(a, b)	((a) / (b))
#endif

/**
 * struct dbal_path - what the choice needs to know about a path
 * @queued: bytes not yet acknowledged
 * @rate: bytes per second it delivers, > 0
 * @owd_us: one-way propagation delay, microseconds
 */
struct dbal_path {
	u64 queued;
	u64 rate;
	u32 owd_us;
};

/* When @size more bytes sent on @p would arrive, microseconds from now. */
static inline u64 dbal_arrival_us(const struct dbal_path *p, u64 size)
{
	u64 rate = p->rate ? p->rate : 1;

	return dbal_div_u64((p->queued + size) * 1000000ULL, rate) + p->owd_us;
}

/**
 * dbal_earliest - the path on which @size bytes arrive first
 * @p: the paths
 * @n: how many, >= 1
 * @size: bytes to send
 * @usable: bit i set if path i may be chosen
 *
 * Return: index of the earliest usable path (the lowest index on a tie),
 * or @n if none is usable.
 */
static inline u32 dbal_earliest(const struct dbal_path *p, u32 n, u32 size,
				u32 usable)
{
	u64 best_at = 0, at;
	u32 i, best = n;

	for (i = 0; i < n; i++) {
		if (!(usable & (1U << i)))
			continue;
		at = dbal_arrival_us(&p[i], size);
		if (best == n || at < best_at) {
			best = i;
			best_at = at;
		}
	}
	return best;
}

/**
 * dbal_wait_pays - whether to wait for the earliest path, which is full
 * @best: the earliest path; it cannot take data now
 * @now: the earliest of the paths that can
 * @size: bytes of this run
 * @pending: bytes the connection has not sent yet, this run included
 *
 * The run alone would arrive sooner on @best, but while it waits, every
 * byte behind it waits too. Sending it on @now pays when it arrives there
 * no later than the connection's pending data would finish arriving on
 * @best alone (the completion-time test of ECF: Lim, Nahum, Towsley,
 * Gibbens, "ECF: An MPTCP Path Scheduler to Manage Heterogeneous Paths",
 * CoNEXT 2017). A short exchange (little pending) keeps waiting for the
 * short path; a bulk transfer spreads over both.
 */
static inline bool dbal_wait_pays(const struct dbal_path *best,
				  const struct dbal_path *now, u32 size,
				  u64 pending)
{
	if (pending < size)
		pending = size;
	return dbal_arrival_us(now, size) > dbal_arrival_us(best, pending);
}

#endif /* __MPTCP_DELAYBAL_POLICY_H */
