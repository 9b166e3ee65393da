// SPDX-License-Identifier: BSD-3-Clause
/**
 * @file status_file.c
 *
 * @brief Machine-readable gateway state for braid-proxy and the CLI.
 *
 * Readers poll the file, so it must never be seen half written: it is
 * written to a temporary file in the same directory and renamed over
 * the old one, which is atomic on POSIX file systems.  mptcpd runs as
 * root, so the directory is opened once per write without following
 * links and refused if others can write it, and the temporary file is
 * a new one with a random name (O_EXCL | O_NOFOLLOW).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ell/ell.h>

#include "gateway_config.h"
#include "gateway_health.h"
#include "status_file.h"

/**
 * @brief Format @a ts as RFC 3339 UTC with milliseconds.
 */
static void format_rfc3339(struct timespec const *ts, char *buf, size_t len)
{
        struct tm tm;
        char base[24];

        gmtime_r(&ts->tv_sec, &tm);
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, len, "%s.%03uZ", base,
                 (unsigned int) (ts->tv_nsec / 1000000) % 1000u);
}

/**
 * @brief Open the directory of @a path for writing the status file.
 *
 * Created (0755) if missing.  Refused if it is a symbolic link or
 * writable by group or others: whoever can write the directory could
 * otherwise swap files under root's feet.
 *
 * @return A directory descriptor, or -1 with errno set (EPERM for an
 *         unsafe directory).
 */
static int open_status_dir(char const *path)
{
        char *const dir = l_strdup(path);
        char *const slash = strrchr(dir, '/');
        struct stat st;

        if (slash == dir)
                dir[1] = '\0';  // "/gateways.json": the root directory.
        else if (slash != NULL)
                *slash = '\0';

        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                l_debug("mkdir %s: %s", dir, strerror(errno));

        int const fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                            | O_CLOEXEC);
        int err = errno;

        if (fd >= 0 && (fstat(fd, &st) != 0
                        || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
                l_error("status file %s: directory %s is writable by "
                        "group or others; not writing there", path, dir);
                close(fd);
                l_free(dir);
                errno = EPERM;
                return -1;
        }

        l_free(dir);
        errno = err;
        return fd;
}

/**
 * @brief Write @a text to a new file in @a dirfd, then rename it to @a name.
 *
 * The temporary name is random and created with O_EXCL | O_NOFOLLOW,
 * so nothing that already exists (a planted file or symbolic link) is
 * ever opened, truncated or chmod-ed.
 */
static bool replace_file(int dirfd, char const *name, char const *text,
                         size_t len)
{
        char tmp[64];
        int fd = -1;

        for (int attempt = 0; fd < 0 && attempt < 8; ++attempt) {
                snprintf(tmp, sizeof(tmp), ".%.40s.%08x", name,
                         l_getrandom_uint32());
                fd = openat(dirfd, tmp,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                            | O_CLOEXEC, 0644);
                if (fd < 0 && errno != EEXIST)
                        return false;
        }

        if (fd < 0)
                return false;

        // fchmod: the umask must not make the file unreadable.
        bool ok = fchmod(fd, 0644) == 0
                && write(fd, text, len) == (ssize_t) len;
        int err = errno;

        ok = close(fd) == 0 && ok;
        ok = ok && renameat(dirfd, tmp, dirfd, name) == 0;
        if (!ok) {
                err = errno;
                (void) unlinkat(dirfd, tmp, 0);
        }

        errno = err;
        return ok;
}

/**
 * @brief Append one gateway object to @a out.
 */
static void append_gateway(struct l_string *out,
                           struct gateway_health const *h,
                           struct gateway const *gw,
                           bool first)
{
        char source[INET6_ADDRSTRLEN];
        char changed[40];

        // "" while the gateway's interface has no address.
        if (gw->source.ss_family == AF_UNSPEC)
                source[0] = '\0';
        else
                gwsteer_ntop((struct sockaddr const *) &gw->source,
                             source, sizeof(source));
        format_rfc3339(&gw->last_change, changed, sizeof(changed));

        l_string_append_printf(out,
                               "%s{\"id\":\"%s\",\"source\":\"%s\","
                               "\"interface\":\"%s\","
                               "\"up\":%s,\"backup\":%s,\"best\":%s,",
                               first ? "" : ",",
                               gw->spec->id, source, gw->spec->interface,
                               gw->up ? "true" : "false",
                               gateway_health_is_backup(h, gw)
                               ? "true" : "false",
                               gateway_health_best(h) == gw
                               ? "true" : "false");

        if (gw->has_rtt)
                l_string_append_printf(out,
                                       "\"ewma_ms\":%.3f,\"rtt_ms\":%.3f,",
                                       gw->ewma_ms, gw->rtt_ms);
        else
                l_string_append(out, "\"ewma_ms\":null,\"rtt_ms\":null,");

        // The AvMet score that elects the best gateway (prefer_best).
        l_string_append_printf(out, "\"avmet\":%.3f,", gw->avmet);

        // Lost fraction of the last (up to 64) probes, and how many.
        double const loss = gateway_probe_loss(gw);

        if (loss >= 0)
                l_string_append_printf(out,
                                       "\"probe_loss\":%.4f,\"probes\":%u,",
                                       loss, gw->probes);
        else
                l_string_append(out, "\"probe_loss\":null,\"probes\":0,");

        l_string_append_printf(out,
                               "\"last_change\":\"%s\",\"subflows\":%u}",
                               changed, gw->subflows);
}

bool status_file_write(char const *path, struct gateway_health const *h)
{
        struct l_string *const out = l_string_new(512);
        struct timespec now;
        char updated[40];
        bool first = true;

        clock_gettime(CLOCK_REALTIME, &now);
        format_rfc3339(&now, updated, sizeof(updated));

        l_string_append_printf(out,
                               "{\"version\":1,\"updated\":\"%s\","
                               "\"gateways\":[",
                               updated);

        for (struct l_queue_entry const *e =
                     l_queue_get_entries(gateway_health_gateways(h));
             e;
             e = e->next) {
                append_gateway(out, h, e->data, first);
                first = false;
        }

        l_string_append(out, "]}\n");

        unsigned int len = 0;
        char *const text = l_string_unwrap(out);
        len = (unsigned int) strlen(text);

        char const *const slash = strrchr(path, '/');
        char const *const name = slash != NULL ? slash + 1 : path;
        int const dirfd = open_status_dir(path);
        bool const ok = dirfd >= 0
                && replace_file(dirfd, name, text, len);

        if (!ok)
                l_error("status file %s: %s", path, strerror(errno));

        if (dirfd >= 0)
                close(dirfd);

        l_free(text);

        return ok;
}
