// SPDX-License-Identifier: GPL-2.0
/*
 * HyWF: random split of one connection's packets over several networks, a
 * website-fingerprinting defense (Henri, Garcia-Aviles, Serrano, Banchs,
 * Thiran, "Protecting against website fingerprinting with multihoming",
 * PoPETs 2020).
 *
 * An observer of one network sees only part of a page load's packets, and
 * a different, random part each time. Per page load the sender draws a
 * split and then sends bursts of consecutive packets on one path each:
 *
 *   page load:  p ~ U[c - h, c + h],  c = ps, h = min(c, 1 - c)
 *               (U[0, 2 ps] for ps <= 1/2: favours a cheap second network;
 *                U[0, 1] by default; uniform on the simplex for 3+ paths)
 *   burst:      length L ~ Geometric(1 / ncons) packets, mean ncons
 *               path 1 with probability p, else path 2
 *
 * The paper measured the k-FP attack's true-positive rate falling from 91%
 * to 36% (closed world) with no bandwidth overhead. Both ends run the
 * scheduler independently: the client splits what it sends, the proxy what
 * it returns.
 *
 * State machine per connection (struct hywf_conn in hywf_policy.h):
 *
 *   no split --first data--> split drawn --idle > hywf_idle_ms--> redrawn
 *                                 |                                  ^
 *                                 +---- subflow joins or dies -------+
 *
 * A Tor or HTTP keep-alive connection carries many page loads; one split
 * for all of them would let an observer learn it over time, so an idle gap
 * longer than hywf_idle_ms starts a new split. The default, 500 ms, is
 * longer than the gaps inside a page load on the paths we target (a few
 * round trips) and shorter than a user's dwell time between pages; a redraw
 * inside a page only adds randomness.
 *
 * Bursts are honoured at segment granularity: the scheduler sets
 * msk->snd_burst to L * MSS and the push path asks again once it is spent.
 *
 * Never stalling: when the chosen subflow cannot take data the scheduler
 * waits, because sending the burst elsewhere would make the split follow the
 * paths' capacities and leak them. If it is still blocked after
 * HYWF_STALL_RTTS smoothed RTTs (clamped to [HYWF_STALL_MIN_MS,
 * HYWF_STALL_MAX_MS]), or the subflow is no longer active, the burst moves
 * to another subflow and MPTcpExtSchedFallback counts it. Backup subflows
 * carry data only when no other subflow is active. Retransmissions
 * (reinjections) use the default choice: there is nothing left to hide.
 *
 * Parameters, per network namespace (net.mptcp.*):
 *   hywf_ps_permille  centre of the first path's split range, 0..1000 (500)
 *   hywf_ncons        mean burst length in packets, 1..10000 (20, as HyWF)
 *   hywf_idle_ms      idle gap that starts a new split, 1..3600000 (500)
 */

#define pr_fmt(fmt) "MPTCP: " fmt

#include <linux/init.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/random.h>
#include <linux/sizes.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/tcp.h>

#include "protocol.h"
#include "mib.h"
#include "hywf_policy.h"

#define HYWF_PS_PERMILLE_DEFAULT	500
#define HYWF_NCONS_DEFAULT		20
#define HYWF_NCONS_MAX			10000
#define HYWF_IDLE_MS_DEFAULT		500
#define HYWF_IDLE_MS_MAX		3600000
#define HYWF_STALL_RTTS			4
#define HYWF_STALL_MIN_MS		50
#define HYWF_STALL_MAX_MS		1000
/* a backup subflow sends in bursts as large as the default scheduler's */
#define HYWF_BACKUP_BURST_BYTES		SZ_64K

/**
 * struct hywf_sock - per-connection scheduler state, in msk's private area
 * @conn: split and idle state, shared with the policy core
 * @wait_start_ms: when the burst's subflow was first found unable to send
 * @path: index of the current burst's subflow among the usable ones
 * @waiting: @wait_start_ms is valid
 */
struct hywf_sock {
	struct hywf_conn conn;
	u32 wait_start_ms;
	u8 path;
	u8 waiting;
};

/**
 * struct hywf_pernet - per-namespace parameters and their sysctl table
 * @params: split centre and mean burst length
 * @idle_ms: idle gap that starts a new split
 * @ctl_hdr: registered sysctl table
 */
struct hywf_pernet {
	struct hywf_params params;
	u32 idle_ms;
	struct ctl_table_header *ctl_hdr;
};

static unsigned int hywf_net_id __read_mostly;

static u32 hywf_get_random(void *ctx)
{
	return get_random_u32();
}

static struct hywf_rand hywf_rand = { .next = hywf_get_random };

static u32 hywf_now_ms(void)
{
	return jiffies_to_msecs(jiffies);
}

static struct hywf_sock *hywf_sk(struct mptcp_sock *msk)
{
	return mptcp_sched_priv(msk);
}

static struct hywf_pernet *hywf_pernet(const struct mptcp_sock *msk)
{
	return net_generic(sock_net((const struct sock *)msk), hywf_net_id);
}

/* How long a burst may wait for its subflow before it moves elsewhere. */
static u32 hywf_stall_ms(const struct sock *ssk)
{
	u32 srtt_ms = (tcp_sk(ssk)->srtt_us >> 3) / USEC_PER_MSEC;

	return clamp_t(u32, HYWF_STALL_RTTS * srtt_ms, HYWF_STALL_MIN_MS,
		       HYWF_STALL_MAX_MS);
}

static int hywf_schedule(struct mptcp_sock *msk, struct sock *ssk, u32 burst)
{
	if (!ssk)
		return -EINVAL;
	if (burst)
		msk->snd_burst = burst;
	mptcp_subflow_set_scheduled(mptcp_subflow_ctx(ssk), true);
	return 0;
}

static u32 hywf_burst_bytes(const struct sock *ssk, u32 packets)
{
	u32 mss = max_t(u32, tcp_sk(ssk)->mss_cache, 1);

	return min_t(u64, (u64)packets * mss, INT_MAX);
}

/* The burst's subflow cannot send: wait, or move the burst if it is stuck. */
static int hywf_blocked(struct mptcp_sock *msk, struct sock **paths, u32 n)
{
	struct hywf_sock *hs = hywf_sk(msk);
	struct sock *ssk = paths[hs->path];
	u32 now = hywf_now_ms();
	u32 i;

	if (!hs->waiting) {
		hs->waiting = 1;
		hs->wait_start_ms = now;
	}
	if ((u32)(now - hs->wait_start_ms) < hywf_stall_ms(ssk))
		return -EINVAL;

	for (i = 0; i < n; i++) {
		if (i != hs->path && sk_stream_memory_free(paths[i])) {
			MPTCP_INC_STATS(sock_net((struct sock *)msk),
					MPTCP_MIB_SCHEDFALLBACK);
			hs->path = i;
			hs->waiting = 0;
			return hywf_schedule(msk, paths[i], 0);
		}
	}
	return -EINVAL;
}

static int hywf_get_subflow(struct mptcp_sock *msk,
			    struct mptcp_sched_data *data)
{
	struct hywf_pernet *pn = hywf_pernet(msk);
	struct hywf_sock *hs = hywf_sk(msk);
	struct mptcp_subflow_context *subflow;
	struct sock *paths[HYWF_MAX_PATHS];
	struct sock *backup = NULL;
	struct hywf_params params;
	u32 n = 0, now, idle_ms, pkts;

	if (data->reinject)
		return hywf_schedule(msk, mptcp_subflow_get_retrans(msk), 0);

	mptcp_for_each_subflow(msk, subflow) {
		struct sock *ssk = mptcp_subflow_tcp_sock(subflow);

		if (!mptcp_subflow_active(subflow))
			continue;
		if (subflow->backup || subflow->request_bkup) {
			if (!backup)
				backup = ssk;
		} else if (n < HYWF_MAX_PATHS) {
			paths[n++] = ssk;
		}
	}

	if (!n) {
		if (!backup || !sk_stream_memory_free(backup))
			return -EINVAL;
		return hywf_schedule(msk, backup, HYWF_BACKUP_BURST_BYTES);
	}

	/* A subflow that left or joined changes n: the core then redraws. */
	now = hywf_now_ms();
	idle_ms = READ_ONCE(pn->idle_ms);
	if (!hywf_keep_burst(&hs->conn, n, hs->path, msk->snd_burst, now,
			     idle_ms)) {
		params.ps_permille = READ_ONCE(pn->params.ps_permille);
		params.ncons = READ_ONCE(pn->params.ncons);
		hs->path = hywf_next_burst(&hs->conn, &params, n, now, idle_ms,
					   &hywf_rand, &pkts);
		msk->snd_burst = hywf_burst_bytes(paths[hs->path], pkts);
		hs->waiting = 0;
	}

	if (!sk_stream_memory_free(paths[hs->path]))
		return hywf_blocked(msk, paths, n);

	hs->waiting = 0;
	return hywf_schedule(msk, paths[hs->path], 0);
}

static void hywf_init(struct mptcp_sock *msk)
{
	BUILD_BUG_ON(sizeof(struct hywf_sock) > MPTCP_SCHED_PRIV_SIZE);
	msk->snd_burst = 0;
}

static struct mptcp_sched_ops mptcp_sched_hywf = {
	.get_subflow	= hywf_get_subflow,
	.init		= hywf_init,
	.name		= "hywf",
	.flags		= MPTCP_SCHED_FLAG_SEGMENT_BURST,
	.owner		= THIS_MODULE,
};

static const unsigned int hywf_ps_permille_max = HYWF_PERMILLE;
static const unsigned int hywf_ncons_max = HYWF_NCONS_MAX;
static const unsigned int hywf_idle_ms_max = HYWF_IDLE_MS_MAX;

static struct hywf_pernet hywf_defaults = {
	.params = {
		.ps_permille	= HYWF_PS_PERMILLE_DEFAULT,
		.ncons		= HYWF_NCONS_DEFAULT,
	},
	.idle_ms	= HYWF_IDLE_MS_DEFAULT,
};

/* .data points into hywf_defaults; each namespace's copy is rebased. */
static const struct ctl_table hywf_sysctl_table[] = {
	{
		.procname	= "hywf_ps_permille",
		.data		= &hywf_defaults.params.ps_permille,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ZERO,
		.extra2		= (void *)&hywf_ps_permille_max,
	},
	{
		.procname	= "hywf_ncons",
		.data		= &hywf_defaults.params.ncons,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&hywf_ncons_max,
	},
	{
		.procname	= "hywf_idle_ms",
		.data		= &hywf_defaults.idle_ms,
		.maxlen		= sizeof(unsigned int),
		.mode		= 0644,
		.proc_handler	= proc_douintvec_minmax,
		.extra1		= SYSCTL_ONE,
		.extra2		= (void *)&hywf_idle_ms_max,
	},
};

static int __net_init hywf_net_init(struct net *net)
{
	struct hywf_pernet *pn = net_generic(net, hywf_net_id);

	pn->params = hywf_defaults.params;
	pn->idle_ms = hywf_defaults.idle_ms;
	pn->ctl_hdr = mptcp_sched_register_sysctl(net, hywf_sysctl_table,
						  ARRAY_SIZE(hywf_sysctl_table),
						  &hywf_defaults, pn);
	if (IS_ENABLED(CONFIG_SYSCTL) && !pn->ctl_hdr)
		return -ENOMEM;
	return 0;
}

static void __net_exit hywf_net_exit(struct net *net)
{
	struct hywf_pernet *pn = net_generic(net, hywf_net_id);

	mptcp_sched_unregister_sysctl(pn->ctl_hdr);
}

static struct pernet_operations hywf_net_ops = {
	.init	= hywf_net_init,
	.exit	= hywf_net_exit,
	.id	= &hywf_net_id,
	.size	= sizeof(struct hywf_pernet),
};

static int __init mptcp_hywf_register(void)
{
	int err;

	err = register_pernet_subsys(&hywf_net_ops);
	if (err)
		return err;
	err = mptcp_register_scheduler(&mptcp_sched_hywf);
	if (err)
		unregister_pernet_subsys(&hywf_net_ops);
	return err;
}
late_initcall(mptcp_hywf_register);
