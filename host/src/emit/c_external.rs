//! The C for external tensors (`analyze::external`): tensors in buffers the firmware owns and
//! binds at run time, outside every arena. Written only when the plan has some, so that a plan
//! without them emits exactly what it did before.
//!
//! An *external buffer* is the root of an external alias group (the tensor the firmware hands
//! a buffer in for); its views are external tensors in that buffer at their view offset. The
//! header lists the buffers to bind and declares one `{prefix}_bind_tensor_{id}` per buffer
//! and the generic `{prefix}_bind_tensor(tensor, ...)` (for `{PREFIX}_INPUT_0` and the like);
//! `{prefix}_data_of` finds an external tensor's bytes through the bound buffer.

use std::fmt::{self, Write};

use super::c_templates::{self, expand};
use super::c_text::comment_text;
use crate::render::RenderPlan;

/// The external buffers of `plan` (tensor indices of the external roots), in tensor order.
pub fn external_buffers(plan: &RenderPlan) -> Vec<usize> {
    plan.tensors
        .iter()
        .enumerate()
        .filter(|(_, tensor)| tensor.external && tensor.alias_of.is_none())
        .map(|(index, _)| index)
        .collect()
}

/// `{prefix}_bind_tensor_{id}`: the bind function of the buffer of tensor `index`.
fn bind_function(plan: &RenderPlan, index: usize) -> String {
    let c_name = &plan.tensors[index].c_name;
    let suffix = c_name
        .strip_prefix(&format!("{}_tensor_", plan.prefix))
        .unwrap_or(c_name);
    format!("{}_bind_tensor_{suffix}", plan.prefix)
}

/// The status value for a tensor that is not an external buffer, added to the status enum.
pub const STATUS_ERR_TENSOR: &str =
    "    @P@_ERR_TENSOR = -7 /* not the tensor of an external buffer */\n";

/// The header part: what must be bound, the tables and the bind functions.
pub fn write_declarations(out: &mut dyn Write, plan: &RenderPlan) -> fmt::Result {
    let p = &plan.prefix;
    let pm = plan.macro_prefix();
    let buffers = external_buffers(plan);
    if buffers.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "/* External tensors: they live in buffers the firmware owns, outside every arena.\n   \
         Bind each of these buffers before inference ({p}_data_of() gives NULL for a tensor\n   \
         whose buffer is not bound; {p}_external_buffers_bound() tells whether all are):"
    )?;
    for &index in &buffers {
        let tensor = &plan.tensors[index];
        let name = if tensor.name == tensor.id {
            String::new()
        } else {
            format!(" `{}`", comment_text(&tensor.name))
        };
        writeln!(
            out,
            "     {}(){name}: {}, at least {} bytes, aligned to {}",
            bind_function(plan, index),
            tensor.kind.as_str(),
            tensor.size,
            tensor.alignment
        )?;
        for view in &plan.tensors {
            if view.external && view.alias_of == Some(index) {
                writeln!(
                    out,
                    "       holds {} at offset {}",
                    view.c_name, view.offset
                )?;
            }
        }
    }
    writeln!(out, "*/")?;
    let views = plan.tensors.iter().filter(|t| t.external).count();
    writeln!(out, "#define {pm}_NUM_EXTERNAL_BUFFERS {}u", buffers.len())?;
    writeln!(out, "#define {pm}_NUM_EXTERNAL_TENSORS {views}u")?;
    write!(out, "{}", expand(EXTERNAL_TYPES, p))?;
    writeln!(
        out,
        "extern const {p}_external_buffer_t {p}_external_buffers[{pm}_NUM_EXTERNAL_BUFFERS];"
    )?;
    writeln!(
        out,
        "extern const {p}_external_tensor_t {p}_external_tensors[{pm}_NUM_EXTERNAL_TENSORS];"
    )?;
    writeln!(
        out,
        "/* Base of each external buffer; NULL until bound. */\nextern uint8_t *{p}_external_bases[{pm}_NUM_EXTERNAL_BUFFERS];"
    )?;
    write!(out, "{}", expand(BIND_TENSOR_DECLARATIONS, p))?;
    for &index in &buffers {
        writeln!(
            out,
            "int {}(void *buffer, size_t size); /* {p}_bind_tensor({}, ...) */",
            bind_function(plan, index),
            plan.tensors[index].c_name
        )?;
    }
    writeln!(out)
}

/// The source part: the tables, the bind functions and the look-up `{prefix}_data_of` uses
/// (`static`, written before it).
pub fn write_definitions(out: &mut dyn Write, plan: &RenderPlan) -> fmt::Result {
    let p = &plan.prefix;
    let pm = plan.macro_prefix();
    let buffers = external_buffers(plan);
    if buffers.is_empty() {
        return Ok(());
    }
    let position = |index: usize| buffers.iter().position(|&b| b == index).unwrap_or(0);
    writeln!(
        out,
        "const {p}_external_buffer_t {p}_external_buffers[{pm}_NUM_EXTERNAL_BUFFERS] = {{"
    )?;
    for &index in &buffers {
        let tensor = &plan.tensors[index];
        writeln!(
            out,
            "    {{ {}, {}u, {}u }},",
            tensor.c_name, tensor.size, tensor.alignment
        )?;
    }
    writeln!(out, "}};\n")?;
    writeln!(
        out,
        "const {p}_external_tensor_t {p}_external_tensors[{pm}_NUM_EXTERNAL_TENSORS] = {{"
    )?;
    for (index, tensor) in plan.tensors.iter().enumerate() {
        if tensor.external {
            let buffer = position(tensor.alias_of.unwrap_or(index));
            writeln!(
                out,
                "    {{ {}, {buffer}u, {}u }},",
                tensor.c_name, tensor.offset
            )?;
        }
    }
    writeln!(out, "}};\n")?;
    writeln!(
        out,
        "uint8_t *{p}_external_bases[{pm}_NUM_EXTERNAL_BUFFERS]; /* bound at run time */\n"
    )?;
    write!(out, "{}", expand(EXTERNAL_FUNCTIONS, p))?;
    for &index in &buffers {
        writeln!(
            out,
            "\nint {}(void *buffer, size_t size) {{\n    return {p}_bind_tensor((uint32_t){}, buffer, size);\n}}",
            bind_function(plan, index),
            plan.tensors[index].c_name
        )?;
    }
    writeln!(out)
}

const EXTERNAL_TYPES: &str = "\
typedef struct {
    uint32_t tensor; /* enum @p@_tensor_id: the tensor the buffer holds */
    size_t size; /* the buffer holds at least this many bytes */
    size_t alignment; /* and starts at a multiple of this */
} @p@_external_buffer_t;
typedef struct {
    uint32_t tensor; /* enum @p@_tensor_id */
    uint32_t buffer; /* index in @p@_external_buffers */
    size_t offset; /* of the tensor's bytes in that buffer */
} @p@_external_tensor_t;
";

const BIND_TENSOR_DECLARATIONS: &str = "\
/* Binds the buffer of an external tensor (one listed above, e.g. @P@_INPUT_0): checks that
   the tensor has an external buffer (@P@_ERR_TENSOR), the buffer is not NULL, holds at least
   the tensor's bytes and is aligned as it needs. Returns @P@_OK or an error; on error
   nothing changes. Bind again to switch buffers between inferences. */
int @p@_bind_tensor(uint32_t tensor, void *buffer, size_t size);
/* @P@_OK when every external buffer is bound, else @P@_ERR_UNBOUND. */
int @p@_external_buffers_bound(void);
";

const EXTERNAL_FUNCTIONS: &str = "\
int @p@_bind_tensor(uint32_t tensor, void *buffer, size_t size) {
    uint32_t index;
    for (index = 0; index < (uint32_t)@P@_NUM_EXTERNAL_BUFFERS; ++index) {
        const @p@_external_buffer_t *external = &@p@_external_buffers[index];
        if (external->tensor != tensor) {
            continue;
        }
        if (buffer == NULL) {
            return @P@_ERR_NULL;
        }
        if (size < external->size) {
            return @P@_ERR_SIZE;
        }
        if (((uintptr_t)buffer & (uintptr_t)(external->alignment - 1u)) != 0u) {
            return @P@_ERR_ALIGNMENT;
        }
        @p@_external_bases[index] = (uint8_t *)buffer;
        return @P@_OK;
    }
    return @P@_ERR_TENSOR;
}

int @p@_external_buffers_bound(void) {
    uint32_t index;
    for (index = 0; index < (uint32_t)@P@_NUM_EXTERNAL_BUFFERS; ++index) {
        if (@p@_external_bases[index] == NULL) {
            return @P@_ERR_UNBOUND;
        }
    }
    return @P@_OK;
}

/* The bytes of external tensor `tensor` in its bound buffer; NULL when it is not external or
   its buffer is not bound. */
static uint8_t *@p@_external_data_of(uint32_t tensor) {
    uint32_t index;
    for (index = 0; index < (uint32_t)@P@_NUM_EXTERNAL_TENSORS; ++index) {
        const @p@_external_tensor_t *external = &@p@_external_tensors[index];
        if (external->tensor == tensor) {
            uint8_t *base = @p@_external_bases[external->buffer];
            return base == NULL ? NULL : base + external->offset;
        }
    }
    return NULL;
}
";

/// `{prefix}_data_of` for a plan with external tensors: [`c_templates::DATA_OF`], with a
/// tensor in no region looked up among the external tensors.
pub fn data_of_with_external() -> String {
    let no_region =
        "descriptor->region >= (uint32_t)@p@_num_arena_buffers) {\n        return NULL;";
    let external = "descriptor->region >= (uint32_t)@p@_num_arena_buffers) {\n        return @p@_external_data_of(tensor);";
    c_templates::DATA_OF.replace(no_region, external)
}

/// `{prefix}_data_of` for a plan whose every sized tensor is external (it has no regions).
pub const DATA_OF_EXTERNAL_ONLY: &str = "\
uint8_t *@p@_data_of(uint32_t tensor) {
    return @p@_external_data_of(tensor);
}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_of_with_external_looks_tensors_in_no_region_up_among_the_external_ones() {
        let text = data_of_with_external();
        assert!(
            text.contains(
                "_num_arena_buffers) {\n        return @p@_external_data_of(tensor);\n    }"
            ),
            "{text}"
        );
        // Everything else is the plain accessor's.
        assert_eq!(
            text.replace("@p@_external_data_of(tensor)", "NULL"),
            c_templates::DATA_OF
        );
    }
}
