/*
 * memplan_planner.h: the C interface of memplan planner plugins (C ABI 1.0).
 *
 * A C or C++ planner is a *packer*: given the buffers of one arena (for each its size,
 * alignment, inclusive lifetime and optional fixed offset), the planner options (JSON) and the
 * bytes left under the memory's budget, it returns an offset per buffer. memplan does
 * everything around it exactly as its planner kit does for planners written in Rust: constants,
 * persistent tensors, the choice of memories with spill under budgets, aliases, empty tensors;
 * then its checker checks the whole plan. docs/writing-a-planner-in-c.md is the guide; this
 * header is the contract.
 *
 * A plugin file is a shared library that
 *   1. defines each packer with MEMPLAN_PACKER(symbol) { ... } (an exported C function of type
 *      memplan_pack_fn), and
 *   2. lists its planners once, in one translation unit, with
 *      MEMPLAN_MANIFEST(MEMPLAN_PLANNER("name", "version", "description", symbol) ...);
 *      memplan reads that list from the file without loading it.
 *
 * Memory: every pointer the host passes (request, buffers, options, offsets, host) belongs to
 * the host and is valid during the call only; the packer writes the offsets into the host's
 * array and sets offset_count. Strings the packer passes to a host callback are copied before
 * the callback returns. The host never frees anything of the packer's.
 *
 * Calls: one at a time per process (memplan runs one planner per worker process), from any
 * thread; a packer may start threads of its own but must join them before it returns. It must
 * not let a C++ exception, a longjmp or a signal escape the call.
 *
 * Versions: MEMPLAN_C_ABI_VERSION is this interface's version, separate from the Rust plugin
 * ABI. A minor release only appends fields to memplan_pack_request (read them when
 * request->abi_minor is high enough); anything else is a new major, and memplan refuses a file
 * built against another major by its manifest, without loading it.
 */
#ifndef MEMPLAN_PLANNER_H
#define MEMPLAN_PLANNER_H

#include <stddef.h>
#include <stdint.h>

#define MEMPLAN_C_ABI_VERSION_MAJOR 1
#define MEMPLAN_C_ABI_VERSION_MINOR 0
#define MEMPLAN_C_ABI_VERSION "1.0"

/* A buffer's fixed_offset when it has none. */
#define MEMPLAN_NO_FIXED_OFFSET UINT64_MAX
/* request->room when no budget limits the memory. */
#define MEMPLAN_UNBOUNDED UINT64_MAX
/* What remaining_ms returns when there is no time limit. */
#define MEMPLAN_NO_DEADLINE UINT64_MAX

/* What a packer returns; anything but MEMPLAN_OK should come with set_error's message. */
typedef int32_t memplan_status;
#define MEMPLAN_OK 0              /* every offset written, offset_count == buffer_count */
#define MEMPLAN_DOES_NOT_FIT 1    /* the buffers cannot be packed (memplan exits 5) */
#define MEMPLAN_INVALID_REQUEST 2 /* options or buffers this packer refuses (exit 2) */
#define MEMPLAN_CANCELLED 3       /* asked to stop before it had a packing (exit 4) */
#define MEMPLAN_FAILED 4          /* any other failure (exit 4) */

typedef int32_t memplan_log_level;
#define MEMPLAN_LOG_ERROR 0
#define MEMPLAN_LOG_WARN 1
#define MEMPLAN_LOG_INFO 2
#define MEMPLAN_LOG_DEBUG 3
#define MEMPLAN_LOG_TRACE 4

/* One buffer to place. */
typedef struct memplan_buffer {
    uint64_t size;         /* bytes, at least 1 */
    uint64_t alignment;    /* a power of two; the offset must be a multiple of it */
    uint32_t first;        /* first op step the buffer is live, inclusive */
    uint32_t last;         /* last op step the buffer is live, inclusive (first <= last) */
    uint64_t fixed_offset; /* the offset to use as it is, or MEMPLAN_NO_FIXED_OFFSET */
} memplan_buffer;

/* The host's callbacks; pass `state` back to each. */
typedef struct memplan_host {
    void *state;
    /* Logs one line (NUL-terminated UTF-8) in memplan's log, tagged with the planner. */
    void (*log)(void *state, memplan_log_level level, const char *message);
    /* Non-zero once the packer should stop (time limit): return its best packing so far, or
     * MEMPLAN_CANCELLED. Cheap: poll it in long loops. */
    int32_t (*should_stop)(void *state);
    /* Milliseconds left before the time limit, or MEMPLAN_NO_DEADLINE. */
    uint64_t (*remaining_ms)(void *state);
    /* A one-line note shown beside the plan ("proven optimal"); the last call wins. */
    void (*set_note)(void *state, const char *note);
    /* The message of a failure, shown with the planner's name; the last call wins. */
    void (*set_error)(void *state, const char *message);
} memplan_host;

/* What one packer call is asked. */
typedef struct memplan_pack_request {
    uint32_t abi_major; /* MEMPLAN_C_ABI_VERSION_MAJOR of the host */
    uint32_t abi_minor; /* MEMPLAN_C_ABI_VERSION_MINOR of the host */
    const memplan_buffer *buffers;
    uint64_t buffer_count; /* at least 1 */
    /* The planner options (--planner-options), a NUL-terminated JSON object; "{}" if none. */
    const char *options_json;
    /* Bytes left in the arena's memory under its budget, or MEMPLAN_UNBOUNDED. A higher
     * packing is still accepted: memplan moves tensors to the next memory, or reports it. */
    uint64_t room;
    const memplan_host *host;
} memplan_pack_request;

/* Where the packer writes its answer. */
typedef struct memplan_pack_result {
    /* The host's array of buffer_count offsets (each MEMPLAN_NO_FIXED_OFFSET on entry): write
     * offsets[i] for buffers[i]. */
    uint64_t *offsets;
    /* 0 on entry: set it to the number of offsets written (buffer_count on success). */
    uint64_t offset_count;
} memplan_pack_result;

/* A packer. Buffers whose lifetimes share a step must not share a byte; every offset is a
 * multiple of its buffer's alignment; a fixed offset is kept as it is. */
typedef memplan_status (*memplan_pack_fn)(const memplan_pack_request *request,
                                          memplan_pack_result *result);

#ifdef __cplusplus
#define MEMPLAN_EXTERN_C extern "C"
#else
#define MEMPLAN_EXTERN_C
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MEMPLAN_VISIBLE __attribute__((visibility("default")))
#define MEMPLAN_MANIFEST_SECTION __attribute__((used, section(".memplan_planners")))
#else
#error "memplan_planner.h: MEMPLAN_MANIFEST needs GCC or Clang (an ELF section attribute)"
#endif

/* Defines an exported packer with C linkage: MEMPLAN_PACKER(my_pack) { ... }; the body sees
 * `request` and `result`. */
#define MEMPLAN_PACKER(symbol)                                                                   \
    MEMPLAN_EXTERN_C MEMPLAN_VISIBLE memplan_status symbol(const memplan_pack_request *request, \
                                                           memplan_pack_result *result)

/* One planner of the manifest: its NAME for --planner (a-z, 0-9, -), its version, a one-line
 * description (no tabs or line breaks; string literals) and its packer's symbol. */
#define MEMPLAN_PLANNER(name, version, description, symbol) \
    name "\t" version "\t" description "\t" #symbol "\n"

/* The planner manifest: once per library, listing every planner it exports, e.g.
 * MEMPLAN_MANIFEST(MEMPLAN_PLANNER("c-first-fit", "1.0.0", "first fit", first_fit_pack)); */
#define MEMPLAN_MANIFEST(planners)                                                           \
    MEMPLAN_EXTERN_C MEMPLAN_VISIBLE MEMPLAN_MANIFEST_SECTION const char                     \
        memplan_planner_manifest[] = "memplan-planners/2\n"                                  \
                                     "c " MEMPLAN_C_ABI_VERSION "\n" planners

/* Shorthands for the host callbacks. */
static inline void memplan_log(const memplan_pack_request *request, memplan_log_level level,
                               const char *message) {
    request->host->log(request->host->state, level, message);
}

static inline int memplan_should_stop(const memplan_pack_request *request) {
    return request->host->should_stop(request->host->state) != 0;
}

static inline uint64_t memplan_remaining_ms(const memplan_pack_request *request) {
    return request->host->remaining_ms(request->host->state);
}

static inline void memplan_set_note(const memplan_pack_request *request, const char *note) {
    request->host->set_note(request->host->state, note);
}

/* Sets the error message and returns `status`: return memplan_fail(request, ..., "why"); */
static inline memplan_status memplan_fail(const memplan_pack_request *request,
                                          memplan_status status, const char *message) {
    request->host->set_error(request->host->state, message);
    return status;
}

#endif /* MEMPLAN_PLANNER_H */
