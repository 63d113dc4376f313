//! The fixed parts of the emitted C, as text with placeholders: `@p@` is the module prefix
//! and `@P@` its uppercase form. Keeping them as whole functions (rather than line-by-line
//! formatting) lets a reader see exactly the C that is emitted.
//!
//! Variants exist where a plan has no regions or no staged arenas, because a loop over an
//! empty table compares an unsigned value with 0, which `-Wextra` rejects.

/// Expands the placeholders of `template` for module `prefix`.
pub fn expand(template: &str, prefix: &str) -> String {
    template
        .replace("@p@", prefix)
        .replace("@P@", &prefix.to_ascii_uppercase())
}

pub const STATUS_ENUM: &str = "\
/* Results of the bind and hydrate functions. */
typedef enum {
    @P@_OK = 0,
    @P@_ERR_REGION = -1, /* no such region (or not one that takes this call) */
    @P@_ERR_NULL = -2, /* a null pointer */
    @P@_ERR_SIZE = -3, /* a buffer smaller than the arena, or a source of the wrong size */
    @P@_ERR_ALIGNMENT = -4, /* a buffer not aligned to the arena's alignment */
    @P@_ERR_UNBOUND = -5, /* an arena or staged source was never bound */
    @P@_ERR_COUNT = -6 /* a table with the wrong number of entries */
} @p@_status_t;
";

pub const BIND_DECLARATIONS: &str = "\
/* Binds the buffer of one region: checks that the region exists, the buffer is not NULL,
   holds at least @p@_region_sizes[region] bytes and is aligned to
   @p@_region_alignments[region]. A cold constant region is bound to its payload (sidecar
   file contents) where it is stored. Returns @P@_OK or an error; on error nothing changes. */
int @p@_bind_arena(uint32_t region, void *buffer, size_t size);
/* Binds all regions at once, buffers[i] and sizes[i] for region i; count must be
   @p@_num_arena_buffers. Either every region is bound or (on error) none is. */
int @p@_bind_arenas(void *const buffers[], const size_t sizes[], size_t count);
/* Binds the source bytes of a staged constant region (its sidecar file contents);
   size must equal the region size. */
int @p@_bind_staged_source(uint32_t region, const void *source, size_t size);
";

pub const HYDRATE_DECLARATION: &str = "\
/* Copies every staged blob into its arena; call once at boot, before inference.
   Returns @P@_OK, or @P@_ERR_UNBOUND if an arena or source is not bound. Weak where
   the compiler allows it, so that firmware can replace it (e.g. with a DMA copy). */
int @p@_hydrate_constants(void);
";

pub const DESCRIPTOR_TYPE: &str = "\
/* Where a tensor lives: its bytes are region base + offset. Empty tensors take no
   space and have region == @p@_num_arena_buffers, as do external tensors (in buffers the
   firmware binds, if the plan has any: offset is then the offset in that buffer). */
typedef struct {
    uint8_t kind; /* enum @p@_tensor_kind */
    uint32_t region; /* enum @p@_arena_region */
    size_t offset;
    size_t size;
} @p@_descriptor_t;
";

pub const PAYLOAD_TYPE: &str = "\
typedef struct {
    uint32_t region;
    const char *file; /* sidecar file name, in the output directory */
    size_t size;
    uint8_t staged; /* 1: staged (source of a copy), 0: cold (read in place) */
} @p@_payload_t;
";

pub const WEAK_MACRO: &str = "\
#if defined(__GNUC__) || defined(__clang__)
#define @P@_WEAK __attribute__((weak))
#else
#define @P@_WEAK
#endif
";

pub const DATA_OF: &str = "\
uint8_t *@p@_data_of(uint32_t tensor) {
    const @p@_descriptor_t *descriptor;
    uint8_t *base;
    if (tensor >= (uint32_t)@p@_num_tensors) {
        return NULL;
    }
    descriptor = &@p@_descriptors[tensor];
    if (descriptor->region >= (uint32_t)@p@_num_arena_buffers) {
        return NULL;
    }
    base = @p@_region_bases[descriptor->region];
    return base == NULL ? NULL : base + descriptor->offset;
}
";

pub const DATA_OF_NOTHING: &str = "\
uint8_t *@p@_data_of(uint32_t tensor) {
    (void)tensor; /* no tensor has bytes */
    return NULL;
}
";

pub const BIND_ARENAS: &str = "\
static int @p@_check_arena(uint32_t region, const void *buffer, size_t size) {
    if (region >= (uint32_t)@p@_num_arena_buffers) {
        return @P@_ERR_REGION;
    }
    if (buffer == NULL) {
        return @P@_ERR_NULL;
    }
    if (size < @p@_region_sizes[region]) {
        return @P@_ERR_SIZE;
    }
    if (((uintptr_t)buffer & (uintptr_t)(@p@_region_alignments[region] - 1u)) != 0u) {
        return @P@_ERR_ALIGNMENT;
    }
    return @P@_OK;
}

int @p@_bind_arena(uint32_t region, void *buffer, size_t size) {
    int status = @p@_check_arena(region, buffer, size);
    if (status == @P@_OK) {
        @p@_region_bases[region] = (uint8_t *)buffer;
    }
    return status;
}

int @p@_bind_arenas(void *const buffers[], const size_t sizes[], size_t count) {
    size_t region;
    if (count != (size_t)@p@_num_arena_buffers) {
        return @P@_ERR_COUNT;
    }
    if (buffers == NULL || sizes == NULL) {
        return @P@_ERR_NULL;
    }
    for (region = 0; region < count; ++region) {
        int status = @p@_check_arena((uint32_t)region, buffers[region], sizes[region]);
        if (status != @P@_OK) {
            return status;
        }
    }
    for (region = 0; region < count; ++region) {
        @p@_region_bases[region] = (uint8_t *)buffers[region];
    }
    return @P@_OK;
}
";

pub const BIND_ARENAS_NO_REGIONS: &str = "\
int @p@_bind_arena(uint32_t region, void *buffer, size_t size) {
    (void)region;
    (void)buffer;
    (void)size;
    return @P@_ERR_REGION; /* the plan has no regions */
}

int @p@_bind_arenas(void *const buffers[], const size_t sizes[], size_t count) {
    (void)buffers;
    (void)sizes;
    return count == 0u ? @P@_OK : @P@_ERR_COUNT;
}
";

pub const BIND_STAGED_SOURCE: &str = "\
int @p@_bind_staged_source(uint32_t region, const void *source, size_t size) {
    size_t blob;
    for (blob = 0; blob < @P@_NUM_STAGED_BLOBS; ++blob) {
        if (@p@_staged_blobs[blob].region == region) {
            if (source == NULL) {
                return @P@_ERR_NULL;
            }
            if (size != @p@_staged_blobs[blob].size) {
                return @P@_ERR_SIZE;
            }
            @p@_staged_blobs[blob].source = (const uint8_t *)source;
            return @P@_OK;
        }
    }
    return @P@_ERR_REGION;
}
";

pub const BIND_STAGED_SOURCE_NONE: &str = "\
int @p@_bind_staged_source(uint32_t region, const void *source, size_t size) {
    (void)region;
    (void)source;
    (void)size;
    return @P@_ERR_REGION; /* no staged constant regions */
}
";

pub const HYDRATE: &str = "\
@P@_WEAK int @p@_hydrate_constants(void) {
    size_t blob;
    for (blob = 0; blob < @P@_NUM_STAGED_BLOBS; ++blob) {
        if (@p@_region_bases[@p@_staged_blobs[blob].region] == NULL ||
            @p@_staged_blobs[blob].source == NULL) {
            return @P@_ERR_UNBOUND;
        }
    }
    for (blob = 0; blob < @P@_NUM_STAGED_BLOBS; ++blob) {
        memcpy(@p@_region_bases[@p@_staged_blobs[blob].region], @p@_staged_blobs[blob].source,
               @p@_staged_blobs[blob].size);
    }
    return @P@_OK;
}
";

pub const HYDRATE_NOTHING: &str = "\
@P@_WEAK int @p@_hydrate_constants(void) {
    return @P@_OK; /* no staged constants */
}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_both_prefix_forms() {
        assert_eq!(expand("@p@_x @P@_Y", "net"), "net_x NET_Y");
    }
}
