// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file kernel_subflows.h
 *
 * @brief Ask the kernel (sock_diag) which MPTCP subflows exist.
 *
 * mptcpd 0.12 reports subflow events but offers no way to list the
 * subflows that already exist, nor to learn whether a backup flag
 * request was applied (the kernel sends no event for a local priority
 * change).  The kernel's sock_diag interface has both: every TCP
 * subflow carries MPTCP ULP information with the connection token,
 * the address ids and the subflow flags.
 */

#ifndef GWSTEER_KERNEL_SUBFLOWS_H
#define GWSTEER_KERNEL_SUBFLOWS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/**
 * @struct kernel_subflow
 *
 * @brief One established MPTCP subflow as the kernel sees it.
 */
struct kernel_subflow
{
        /// Local address and port.
        struct sockaddr_storage laddr;

        /// Remote address and port.
        struct sockaddr_storage raddr;

        /// Local token of the MPTCP connection (mptcpd's token).
        uint32_t token;

        /// MPTCP_SUBFLOW_FLAG_* bits.
        uint32_t flags;

        /// Local MPTCP address id.
        uint8_t local_id;
};

/**
 * @brief Called once per established MPTCP subflow.
 */
typedef void (*kernel_subflow_cb)(struct kernel_subflow const *sf,
                                  void *user_data);

/**
 * @brief Walk every established MPTCP subflow of this network namespace.
 *
 * Synchronous: a sock_diag dump of IPv4 and IPv6 TCP sockets.
 *
 * @return 0, or an errno value if the kernel could not be asked
 *         (the callback may then have seen only part of the list).
 */
int kernel_subflows_walk(kernel_subflow_cb cb, void *user_data);

/**
 * @brief Whether the subflow carries our (local) backup request.
 */
bool kernel_subflow_backup(struct kernel_subflow const *sf);

/**
 * @brief Whether the subflow is the initial one of a connection we
 *        opened (the active side of MP_CAPABLE).
 */
bool kernel_subflow_initial_client(struct kernel_subflow const *sf);

/**
 * @brief Whether the subflow is the initial one of a connection we
 *        accepted (the passive side of MP_CAPABLE).
 */
bool kernel_subflow_initial_server(struct kernel_subflow const *sf);

#endif  // GWSTEER_KERNEL_SUBFLOWS_H
