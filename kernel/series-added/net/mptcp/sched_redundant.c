// SPDX-License-Identifier: GPL-2.0
/*
 * redundant: every active subflow sends every byte the peer has not yet
 * acknowledged (WISPR's mirroring; Eriksson et al., "The WISPR project",
 * and the mirroring mode of multi-network proxies since).
 *
 * A connection over a lossy or flapping network pays for each loss with a
 * retransmission timeout, and for a dead network with the time it takes to
 * notice. Sending each byte on every path turns the fastest path of the
 * moment into the one that delivers it, at the price of the other paths'
 * capacity:
 *
 *   delivery time of a byte = min over active subflows of its arrival there
 *   goodput                 = that of the best path, not the sum
 *
 * So this is for latency- and loss-sensitive traffic (interactive sessions,
 * small request/response exchanges, VoIP over TCP), not bulk transfers.
 *
 * Each subflow sends from its own position in the data (the framework's
 * MPTCP_SCHED_FLAG_REDUNDANT), skipping what the peer has already
 * acknowledged at the connection level, so a slow path never holds up a
 * fast one and never resends data that has arrived. The receiver drops the
 * copies by data sequence number. Backup subflows carry data only when no
 * other subflow is active. Retransmissions (reinjections) use the default
 * choice.
 *
 * No parameters. Select with sysctl net.mptcp.scheduler=redundant, on both
 * ends: each end mirrors what it sends.
 */

#define pr_fmt(fmt) "MPTCP: " fmt

#include <linux/init.h>
#include <linux/kernel.h>
#include <net/tcp.h>

#include "protocol.h"

static int redundant_get_subflow(struct mptcp_sock *msk,
				 struct mptcp_sched_data *data)
{
	struct mptcp_subflow_context *subflow;
	struct sock *backup = NULL, *ssk;
	int active = 0, scheduled = 0;

	if (data->reinject) {
		ssk = mptcp_subflow_get_retrans(msk);
		if (!ssk)
			return -EINVAL;
		mptcp_subflow_set_scheduled(mptcp_subflow_ctx(ssk), true);
		return 0;
	}

	mptcp_for_each_subflow(msk, subflow) {
		ssk = mptcp_subflow_tcp_sock(subflow);
		if (!mptcp_subflow_active(subflow))
			continue;
		if (subflow->backup || subflow->request_bkup) {
			if (!backup)
				backup = ssk;
			continue;
		}
		active++;
		if (sk_stream_memory_free(ssk)) {
			mptcp_subflow_set_scheduled(subflow, true);
			scheduled++;
		}
	}

	if (!active && backup && sk_stream_memory_free(backup)) {
		mptcp_subflow_set_scheduled(mptcp_subflow_ctx(backup), true);
		scheduled++;
	}
	return scheduled ? 0 : -EINVAL;
}

static struct mptcp_sched_ops mptcp_sched_redundant = {
	.get_subflow	= redundant_get_subflow,
	.name		= "redundant",
	.flags		= MPTCP_SCHED_FLAG_REDUNDANT |
			  MPTCP_SCHED_FLAG_EARLY_JOIN,
	.owner		= THIS_MODULE,
};

static int __init mptcp_redundant_register(void)
{
	return mptcp_register_scheduler(&mptcp_sched_redundant);
}
late_initcall(mptcp_redundant_register);
