/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A subflow's deliverable rate for the schedulers that weigh paths by it
 * (bernoulli, delaybal), decision core: pure integer logic shared by the
 * kernel (mptcp_sched_rate() in sched.c) and braid's userspace test
 * harness. It includes no headers: the includer provides u32/u64.
 *
 * The estimate is the largest of TCP's delivery-rate samples: a flight sent
 * faster than the path's bottleneck comes back at the bottleneck's rate, so
 * the maximum tracks capacity even when the scheduler gives the subflow
 * little to send. A lightly used subflow's samples only show its load, so
 * the maximum is not dropped for them at once: it loses a quarter for every
 * RATE_WINDOW_MS that passes without a larger sample (however many calls
 * fall in that time), down to the latest sample.
 *
 * Before TCP's first sample there is only a guess, cwnd * mss / srtt. It is
 * returned but never kept: an initial window of 10 over a 10 ms handshake
 * RTT says 11.6 Mbit/s whatever the path's capacity, and kept as the
 * maximum it would outweigh a 5 Mbit/s path's real samples for seconds,
 * the moment an optimal split is most sensitive to it.
 */
#ifndef __MPTCP_RATE_POLICY_H
#define __MPTCP_RATE_POLICY_H

#define RATE_WINDOW_MS		2000
/* (3/4)^16 is 1 %: more windows than this take the estimate to the sample */
#define RATE_MAX_DECAY_STEPS	16

/**
 * struct rate_est - a subflow's delivery-rate estimate
 * @max: bytes per second, the largest sample, decayed; 0 before the first
 * @stamp_ms: when @max was raised or last decayed
 */
struct rate_est {
	u64 max;
	u32 stamp_ms;
};

/**
 * rate_update - fold one delivery-rate sample into the estimate
 * @est: the estimate
 * @sample: TCP's latest delivery-rate sample, bytes per second; 0 if TCP
 *	has taken none yet
 * @guess: what to return while there is no sample (cwnd * mss / srtt)
 * @now_ms: current time, wrapping milliseconds
 *
 * Return: the estimate, bytes per second, at least 1.
 */
static inline u64 rate_update(struct rate_est *est, u64 sample, u64 guess,
			      u32 now_ms)
{
	u32 steps;

	if (!est->max && !sample)
		return guess ? guess : 1;
	if (sample >= est->max) {
		est->max = sample;
		est->stamp_ms = now_ms;
		return est->max ? est->max : 1;
	}
	steps = (u32)(now_ms - est->stamp_ms) / RATE_WINDOW_MS;
	if (steps > RATE_MAX_DECAY_STEPS) {
		est->max = sample;
		est->stamp_ms = now_ms;
	} else if (steps) {
		while (steps--)
			est->max -= est->max / 4;
		if (est->max < sample)
			est->max = sample;
		est->stamp_ms = now_ms;
	}
	return est->max ? est->max : 1;
}

#endif /* __MPTCP_RATE_POLICY_H */
