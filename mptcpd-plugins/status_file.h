// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file status_file.h
 *
 * @brief Machine-readable gateway state for braid-proxy and the CLI.
 */

#ifndef GWSTEER_STATUS_FILE_H
#define GWSTEER_STATUS_FILE_H

#include <stdbool.h>

struct gateway_health;

/**
 * @brief Atomically replace the status file at @a path.
 *
 * Format (version 1, one object):
 * @code
 * {"version":1,"updated":"<RFC3339>","gateways":[{"id":"gw1",
 *  "source":"10.1.1.2","up":true,"backup":false,"ewma_ms":12.5,
 *  "rtt_ms":11.0,"last_change":"<RFC3339>","subflows":2}]}
 * @endcode
 * @c backup is the flag currently applied to the gateway's subflows
 * (configured backup, or not the best gateway in prefer_best mode);
 * @c ewma_ms and @c rtt_ms are @c null until a probe was answered.
 *
 * @return @c true if the file was replaced.
 */
bool status_file_write(char const *path, struct gateway_health const *h);

#endif  // GWSTEER_STATUS_FILE_H
