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
 * the address ids and the subflow flags.  The address ids a
 * connection already holds come from the MPTCP path manager's generic
 * netlink family.
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

        /// Whether the kernel sent tcp_info (the three fields below).
        bool has_tcp_info;

        /// Segments sent and not yet acknowledged (tcpi_unacked).
        uint32_t unacked;

        /// Milliseconds since the last ACK arrived (tcpi_last_ack_recv).
        uint32_t last_ack_ms;

        /// Smoothed round-trip time, microseconds (tcpi_rtt).
        uint32_t rtt_us;
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

/**
 * @struct kernel_addr
 *
 * @brief One local address of a connection's userspace path manager.
 *
 * Announced addresses and the local addresses of subflows, each with
 * the MPTCP address id the kernel holds for it on that connection.
 */
struct kernel_addr
{
        /// Address and port (0 if none).
        struct sockaddr_storage addr;

        /// MPTCP local address id.
        uint8_t id;
};

/**
 * @brief Called once per local address of a connection.
 */
typedef void (*kernel_addr_cb)(struct kernel_addr const *addr,
                               void *user_data);

/**
 * @brief Walk the local addresses the kernel holds for a connection.
 *
 * Synchronous: a generic netlink dump of MPTCP_PM_CMD_GET_ADDR with
 * the connection's @a token (userspace path manager, Linux 6.7+).
 *
 * @return 0, or an errno value if the kernel could not be asked or
 *         refused (e.g. an unknown token, or an older kernel).
 */
int kernel_addrs_walk(uint32_t token, kernel_addr_cb cb, void *user_data);

#endif  // GWSTEER_KERNEL_SUBFLOWS_H
