/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute_ketama.h: libketama's server files (address and memory, one server a line) read into an mcr_config.
 * Library: libmcroute, `pkg-config --cflags --libs mcroute`.
 *
 * INTRODUCTION
 *
 * libketama (last.fm, 2007) reads its servers from a text file and places
 * keys on a continuum of MD5 points labelled "address-k", the address being
 * the text written in the file. mcroute's "ketama" mode computes that same
 * continuum; this header adds the reader of the file, so that a libketama
 * deployment can move to mcroute by pointing it at the file it already has.
 *
 *     mcr_config *cfg = mcr_config_new();      (mode "ketama", key hash md5)
 *     if (mcr_ketama_load_file(cfg, "/etc/ketama.servers", &err) != MCR_OK)
 *         fprintf(stderr, "%s\n", err.message);
 *
 * The program-level compatibility (a program written against libketama's
 * <ketama.h>, rebuilt against mcroute) is the separate library libketama in
 * compat/libketama/, built on these functions.
 *
 * THE FILE FORMAT
 *
 * One server a line: `address memory`, the two fields separated by any mix
 * of tabs and spaces.
 *
 *   - address: `host`, `host:port` or, for IPv6, `[addr]` / `[addr]:port`.
 *     A host is a hostname or an IPv4 address; without a port the server is
 *     reached on 11211. The address exactly as written, at most 255 bytes,
 *     is the server's label: its points are the MD5 digests of "address-0",
 *     "address-1", ... as libketama computes them ("10.0.0.1" and
 *     "10.0.0.1:11211" are the same memcached server but two different sets
 *     of points; only one of them may appear in a file).
 *   - memory: a decimal number 1..MCR_WEIGHT_MAX, the server's weight
 *     (libketama gives a server points in proportion to its memory).
 *   - A line whose first non-blank byte is '#' is a comment; so is the rest
 *     of a line from a '#' that follows the memory field after a blank.
 *     Blank lines are skipped, and so are lines shorter than 2 bytes counting
 *     the newline (libketama's rule: a last line of a single byte without a
 *     newline is ignored).
 *   - Lines end with LF or CRLF; the last line may lack its newline.
 *
 * HOW THIS READER DIFFERS FROM libketama'S
 *
 * On a well-formed file (every line `address`, blanks, a plain number and a
 * newline, addresses of at most 23 bytes, comments in the first column)
 * both read the same servers and weights, so mcroute places every key on
 * the point libketama places it on. libketama misreads some files; this
 * reader reads them as written:
 *
 *   1. The last line without a newline: libketama drops the last character
 *      of every memory field, expecting it to be the newline, so there it
 *      drops a digit ("600" becomes 60, "5" an error). Read here as written.
 *   2. Blanks after the memory field, or a third field: libketama's memory
 *      field then ends before the newline and again loses its last digit
 *      ("600 " is read as 60). Here trailing blanks are ignored, a trailing
 *      "# comment" too, and any other third field is an error.
 *   3. Long addresses: libketama rejects a line whose address has 24 bytes
 *      or more, and its `ip` field keeps only 22 bytes of one of 22 or 23
 *      (without a terminating NUL; the points are those of the whole
 *      address). Here addresses of up to 255 bytes are kept whole.
 *   4. Long lines: libketama reads a line in pieces of 126 bytes and parses
 *      each piece as a line of its own. Lines of any length are read whole.
 *   5. Memory that is not a plain number: libketama's strtol() takes "+600",
 *      "600MB" (as 600) and "-600" (as a huge unsigned value, which wrecks
 *      its arithmetic). These are errors here. libketama accepts memory
 *      up to LONG_MAX; mcroute's weights stop at MCR_WEIGHT_MAX (1,000,000),
 *      above which a line is an MCR_ERR_RANGE error naming the limit (a
 *      file that gives memory in bytes rather than megabytes must be
 *      scaled, which moves keys).
 *   6. Blank-only lines, CRLF blank lines and indented comments, which
 *      libketama rejects or misreads as a server, are skipped.
 *   7. Errors: libketama reports the line of a bad memory value but not
 *      what is wrong with an address; here every error names the file, the
 *      line and the problem, and a server listed twice (same host and
 *      port, however written) is an error, where libketama gives that
 *      memcached two shares of the points.
 *
 * Thread-safety: as the rest of the config API, a config belongs to one
 * thread at a time; the functions keep no global state.
 */
#ifndef MCROUTE_KETAMA_H
#define MCROUTE_KETAMA_H

#include <stddef.h>

#include "mcroute.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mcr_ketama_load_file: append the servers of the libketama server
 * file at `path` to `cfg`, in file order, each with weight = memory and the
 * address as written as its label (see mcr_config_add_server_named), its
 * host and port parsed from the address for connecting.
 *
 * The config's mode and hashes are not touched: a config fresh from
 * mcr_config_new() is already in mode "ketama" with key hash md5, which is
 * libketama's placement. (In another mode the servers are still added, but
 * their placement is that mode's, not libketama's.) libketama builds its
 * continuum from the file's servers alone, so for its placement load the
 * file into an empty config.
 *
 * The servers already in `cfg` are kept as they are, in their order, with
 * their ids (labels) and zones (a config's servers are all active).
 *
 * All or nothing: on any error `cfg` is left exactly as it was. `path` is
 * only read during the call.
 *
 * Returns MCR_OK, or (err, if not NULL, receiving the code and a message
 * that names the file, the line and the problem):
 *   MCR_ERR_INVALID   cfg or path is NULL;
 *   MCR_ERR_IO        the file cannot be opened or read;
 *   MCR_ERR_SYNTAX    a line without a memory field, a memory field that is
 *                     not a decimal number, a malformed address (an IPv6
 *                     address without brackets, a third ':' field, a
 *                     forbidden byte), text after the memory field, a NUL;
 *   MCR_ERR_RANGE     memory 0 or above MCR_WEIGHT_MAX, a port outside
 *                     1..65535;
 *   MCR_ERR_TOO_LONG  an address over 255 bytes;
 *   MCR_ERR_DUPLICATE the same host and port twice (the message names both
 *                     lines), or a server already in cfg;
 *   MCR_ERR_EMPTY     no server line in the file;
 *   MCR_ERR_NOMEM. */
MCR_EXTERN int mcr_ketama_load_file(mcr_config *cfg, const char *path, mcr_error *err);

/* mcr_ketama_address: the address of server `i` (0-based, config
 * order) as written in its libketama file: the label its points are named
 * after. A string owned by `cfg`, valid until the config is changed or
 * freed. NULL when `cfg` is NULL, `i` is out of range, or the server was
 * added without a label (the ketama mode then names its points after
 * "host:port", as mcr_ring_server_name() writes it). Thread-safe on a
 * config that no thread changes. */
MCR_EXTERN const char *mcr_ketama_address(const mcr_config *cfg, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* MCROUTE_KETAMA_H */
