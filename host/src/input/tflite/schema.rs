//! Hand-written accessors for the few tables of the TFLite flatbuffer schema (`schema.fbs`,
//! file identifier `TFL3`) that memory planning needs, on top of the `flatbuffers` runtime.
//!
//! Each table is a thin wrapper around a [`flatbuffers::Table`] with one accessor per field
//! we read, addressed by the field's id in the schema (fields are never reordered in
//! `schema.fbs`; new ones are only appended, so ids are stable). A union takes two ids: its
//! type byte, then its value.
//!
//! Safety: reading a flatbuffer without checks is only sound once the verifier has visited
//! every field that will be read. [`verified_model`] is the only way to obtain a [`Model`];
//! it runs the verifier, and each table's [`Verifiable`] impl below visits exactly the fields
//! its accessors read, with the same types. Keep the two lists in step when adding a field.

use flatbuffers::{
    Follow, ForwardsUOffset, InvalidFlatbuffer, Table, VOffsetT, Vector, Verifiable, Verifier,
    VerifierOptions,
};

/// The file identifier every TFLite model carries at bytes 4..8.
pub const FILE_IDENTIFIER: &[u8; 4] = b"TFL3";

/// `BuiltinOperator` codes with a meaning for memory planning: the control-flow operators
/// that run other subgraphs.
pub mod builtin {
    pub const CUSTOM: i32 = 32;
    pub const IF: i32 = 118;
    pub const WHILE: i32 = 119;
    pub const CALL_ONCE: i32 = 129;
}

/// `BuiltinOptions` union members the reader follows (their position in the union, `NONE`
/// being 0).
mod options_type {
    pub const IF_OPTIONS: u8 = 92;
    pub const WHILE_OPTIONS: u8 = 93;
    pub const CALL_ONCE_OPTIONS: u8 = 103;
    pub const VAR_HANDLE_OPTIONS: u8 = 111;
}

/// The vtable slot of the field with schema id `id`.
pub const fn slot(id: u16) -> VOffsetT {
    4 + 2 * id
}

/// A vector of tables, as the schema's `[Table]` fields are stored.
pub type Tables<'a, T> = Vector<'a, ForwardsUOffset<T>>;

/// Element `index` of a flatbuffer vector, `None` when out of range (`Vector::get` panics).
pub fn element<'a, T: Follow<'a> + 'a>(vector: Vector<'a, T>, index: usize) -> Option<T::Inner> {
    (index < vector.len()).then(|| vector.get(index))
}

/// Verifies `bytes` as a TFLite model (the whole reachable part we read) and returns its root.
/// The caller checks the file identifier first, for a clearer message.
pub fn verified_model(bytes: &[u8]) -> Result<Model<'_>, InvalidFlatbuffer> {
    // The default limits (depth 64, a million tables, 2 GiB apparent size) hold every real
    // model: flatbuffers cannot address more than 2 GiB, which is why large models keep
    // their buffers outside the flatbuffer (`Buffer.offset`/`size`).
    flatbuffers::root_with_opts::<Model>(&VerifierOptions::default(), bytes)
}

macro_rules! table {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            table: Table<'a>,
        }

        impl<'a> Follow<'a> for $name<'a> {
            type Inner = $name<'a>;
            unsafe fn follow(buf: &'a [u8], loc: usize) -> Self::Inner {
                $name { table: unsafe { Table::new(buf, loc) } }
            }
        }

        impl<'a> $name<'a> {
            /// The field in `slot`, read as `T`, `None` when absent.
            fn field<T: Follow<'a> + 'a>(&self, slot: VOffsetT) -> Option<T::Inner> {
                // SAFETY: a table value only exists inside a verified model (see the module
                // comment), and each accessor passes the slot and type its verifier visited.
                unsafe { self.table.get::<T>(slot, None) }
            }
        }
    };
}

table!(
    /// `table Model`: the root.
    Model
);
table!(
    /// `table SubGraph`: tensors, inputs, outputs and operators in execution order.
    SubGraph
);
table!(
    /// `table Tensor`.
    Tensor
);
table!(
    /// `table Operator`.
    Operator
);
table!(
    /// `table OperatorCode`.
    OperatorCode
);
table!(
    /// `table Buffer`: bytes inside the flatbuffer, or an offset/size into the file.
    Buffer
);
table!(
    /// `table Metadata`: a named buffer.
    Metadata
);
table!(
    /// `table CallOnceOptions`.
    CallOnceOptions
);
table!(
    /// `table IfOptions`.
    IfOptions
);
table!(
    /// `table WhileOptions`.
    WhileOptions
);
table!(
    /// `table VarHandleOptions`: the resource variable a VAR_HANDLE names.
    VarHandleOptions
);

impl<'a> Model<'a> {
    const OPERATOR_CODES: VOffsetT = slot(1);
    const SUBGRAPHS: VOffsetT = slot(2);
    const BUFFERS: VOffsetT = slot(4);
    const METADATA: VOffsetT = slot(6);

    pub fn operator_codes(&self) -> Option<Tables<'a, OperatorCode<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, OperatorCode<'a>>>>(Self::OPERATOR_CODES)
    }
    pub fn subgraphs(&self) -> Option<Tables<'a, SubGraph<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, SubGraph<'a>>>>(Self::SUBGRAPHS)
    }
    pub fn buffers(&self) -> Option<Tables<'a, Buffer<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, Buffer<'a>>>>(Self::BUFFERS)
    }
    pub fn metadata(&self) -> Option<Tables<'a, Metadata<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, Metadata<'a>>>>(Self::METADATA)
    }
}

impl Verifiable for Model<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Tables<OperatorCode>>>(
                "operator_codes",
                Self::OPERATOR_CODES,
                false,
            )?
            .visit_field::<ForwardsUOffset<Tables<SubGraph>>>("subgraphs", Self::SUBGRAPHS, false)?
            .visit_field::<ForwardsUOffset<Tables<Buffer>>>("buffers", Self::BUFFERS, false)?
            .visit_field::<ForwardsUOffset<Tables<Metadata>>>("metadata", Self::METADATA, false)?
            .finish();
        Ok(())
    }
}

impl<'a> SubGraph<'a> {
    const TENSORS: VOffsetT = slot(0);
    const INPUTS: VOffsetT = slot(1);
    const OUTPUTS: VOffsetT = slot(2);
    const OPERATORS: VOffsetT = slot(3);

    pub fn tensors(&self) -> Option<Tables<'a, Tensor<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, Tensor<'a>>>>(Self::TENSORS)
    }
    pub fn inputs(&self) -> Option<Vector<'a, i32>> {
        self.field::<ForwardsUOffset<Vector<'a, i32>>>(Self::INPUTS)
    }
    pub fn outputs(&self) -> Option<Vector<'a, i32>> {
        self.field::<ForwardsUOffset<Vector<'a, i32>>>(Self::OUTPUTS)
    }
    pub fn operators(&self) -> Option<Tables<'a, Operator<'a>>> {
        self.field::<ForwardsUOffset<Tables<'a, Operator<'a>>>>(Self::OPERATORS)
    }
}

impl Verifiable for SubGraph<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Tables<Tensor>>>("tensors", Self::TENSORS, false)?
            .visit_field::<ForwardsUOffset<Vector<i32>>>("inputs", Self::INPUTS, false)?
            .visit_field::<ForwardsUOffset<Vector<i32>>>("outputs", Self::OUTPUTS, false)?
            .visit_field::<ForwardsUOffset<Tables<Operator>>>("operators", Self::OPERATORS, false)?
            .finish();
        Ok(())
    }
}

impl<'a> Tensor<'a> {
    const SHAPE: VOffsetT = slot(0);
    const TYPE: VOffsetT = slot(1);
    const BUFFER: VOffsetT = slot(2);
    const NAME: VOffsetT = slot(3);
    const IS_VARIABLE: VOffsetT = slot(5);

    /// Dimensions; absent means a scalar.
    pub fn shape(&self) -> Option<Vector<'a, i32>> {
        self.field::<ForwardsUOffset<Vector<'a, i32>>>(Self::SHAPE)
    }
    /// `TensorType` code (FLOAT32 = 0 by default).
    pub fn tensor_type(&self) -> i8 {
        self.field::<i8>(Self::TYPE).unwrap_or(0)
    }
    /// Index into `Model.buffers`; 0 is the empty sentinel buffer.
    pub fn buffer(&self) -> u32 {
        self.field::<u32>(Self::BUFFER).unwrap_or(0)
    }
    /// The name as raw bytes (read as bytes rather than `string` so that a name that is not
    /// UTF-8 does not make the whole model unreadable).
    pub fn name(&self) -> Option<&'a [u8]> {
        self.field::<ForwardsUOffset<Vector<'a, u8>>>(Self::NAME)
            .map(|name| name.bytes())
    }
    pub fn is_variable(&self) -> bool {
        self.field::<bool>(Self::IS_VARIABLE).unwrap_or(false)
    }
}

impl Verifiable for Tensor<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<i32>>>("shape", Self::SHAPE, false)?
            .visit_field::<i8>("type", Self::TYPE, false)?
            .visit_field::<u32>("buffer", Self::BUFFER, false)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("name", Self::NAME, false)?
            .visit_field::<bool>("is_variable", Self::IS_VARIABLE, false)?
            .finish();
        Ok(())
    }
}

impl<'a> Operator<'a> {
    const OPCODE_INDEX: VOffsetT = slot(0);
    const INPUTS: VOffsetT = slot(1);
    const OUTPUTS: VOffsetT = slot(2);
    const BUILTIN_OPTIONS_TYPE: VOffsetT = slot(3);
    const BUILTIN_OPTIONS: VOffsetT = slot(4);

    /// Index into `Model.operator_codes`.
    pub fn opcode_index(&self) -> u32 {
        self.field::<u32>(Self::OPCODE_INDEX).unwrap_or(0)
    }
    /// Input tensor indices; -1 marks an omitted optional input.
    pub fn inputs(&self) -> Option<Vector<'a, i32>> {
        self.field::<ForwardsUOffset<Vector<'a, i32>>>(Self::INPUTS)
    }
    pub fn outputs(&self) -> Option<Vector<'a, i32>> {
        self.field::<ForwardsUOffset<Vector<'a, i32>>>(Self::OUTPUTS)
    }
    fn builtin_options_type(&self) -> u8 {
        self.field::<u8>(Self::BUILTIN_OPTIONS_TYPE).unwrap_or(0)
    }
    /// The options table when the union holds the member `member`.
    fn builtin_options_as<T: Follow<'a, Inner = T> + 'a>(&self, member: u8) -> Option<T> {
        if self.builtin_options_type() == member {
            self.field::<ForwardsUOffset<T>>(Self::BUILTIN_OPTIONS)
        } else {
            None
        }
    }
    pub fn call_once_options(&self) -> Option<CallOnceOptions<'a>> {
        self.builtin_options_as(options_type::CALL_ONCE_OPTIONS)
    }
    pub fn if_options(&self) -> Option<IfOptions<'a>> {
        self.builtin_options_as(options_type::IF_OPTIONS)
    }
    pub fn while_options(&self) -> Option<WhileOptions<'a>> {
        self.builtin_options_as(options_type::WHILE_OPTIONS)
    }
    pub fn var_handle_options(&self) -> Option<VarHandleOptions<'a>> {
        self.builtin_options_as(options_type::VAR_HANDLE_OPTIONS)
    }
}

impl Verifiable for Operator<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        let mut table = v.visit_table(pos)?;
        // The builtin_options union is checked by hand rather than with `visit_union`: only
        // the members we read are verified (like generated code, which skips unknown ones),
        // and a type byte written as NONE without a value is accepted.
        let type_pos = table.deref(Self::BUILTIN_OPTIONS_TYPE)?;
        let value_pos = table.deref(Self::BUILTIN_OPTIONS)?;
        if let Some(type_pos) = type_pos {
            let member = table.verifier().get_u8(type_pos)?;
            if let Some(value_pos) = value_pos {
                let verifier = table.verifier();
                match member {
                    options_type::CALL_ONCE_OPTIONS => verifier
                        .verify_union_variant::<ForwardsUOffset<CallOnceOptions>>(
                            "CallOnceOptions",
                            value_pos,
                        )?,
                    options_type::IF_OPTIONS => verifier
                        .verify_union_variant::<ForwardsUOffset<IfOptions>>(
                            "IfOptions",
                            value_pos,
                        )?,
                    options_type::WHILE_OPTIONS => verifier
                        .verify_union_variant::<ForwardsUOffset<WhileOptions>>(
                            "WhileOptions",
                            value_pos,
                        )?,
                    options_type::VAR_HANDLE_OPTIONS => verifier
                        .verify_union_variant::<ForwardsUOffset<VarHandleOptions>>(
                            "VarHandleOptions",
                            value_pos,
                        )?,
                    _ => {}
                }
            }
        }
        table
            .visit_field::<u32>("opcode_index", Self::OPCODE_INDEX, false)?
            .visit_field::<ForwardsUOffset<Vector<i32>>>("inputs", Self::INPUTS, false)?
            .visit_field::<ForwardsUOffset<Vector<i32>>>("outputs", Self::OUTPUTS, false)?
            .finish();
        Ok(())
    }
}

impl<'a> OperatorCode<'a> {
    const DEPRECATED_BUILTIN_CODE: VOffsetT = slot(0);
    const CUSTOM_CODE: VOffsetT = slot(1);
    const BUILTIN_CODE: VOffsetT = slot(3);

    /// The operator's `BuiltinOperator` code. Old files only have the byte-wide deprecated
    /// field, new ones write both (the deprecated one saturated at 127), so the larger wins.
    pub fn builtin_code(&self) -> i32 {
        let deprecated = self.field::<i8>(Self::DEPRECATED_BUILTIN_CODE).unwrap_or(0);
        let extended = self.field::<i32>(Self::BUILTIN_CODE).unwrap_or(0);
        extended.max(i32::from(deprecated))
    }
    /// The custom operator's name (for `CUSTOM`), raw bytes.
    pub fn custom_code(&self) -> Option<&'a [u8]> {
        self.field::<ForwardsUOffset<Vector<'a, u8>>>(Self::CUSTOM_CODE)
            .map(|code| code.bytes())
    }
}

impl Verifiable for OperatorCode<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i8>(
                "deprecated_builtin_code",
                Self::DEPRECATED_BUILTIN_CODE,
                false,
            )?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("custom_code", Self::CUSTOM_CODE, false)?
            .visit_field::<i32>("builtin_code", Self::BUILTIN_CODE, false)?
            .finish();
        Ok(())
    }
}

impl<'a> Buffer<'a> {
    const DATA: VOffsetT = slot(0);
    const OFFSET: VOffsetT = slot(1);
    const SIZE: VOffsetT = slot(2);

    /// Bytes stored inside the flatbuffer.
    pub fn data(&self) -> Option<&'a [u8]> {
        self.field::<ForwardsUOffset<Vector<'a, u8>>>(Self::DATA)
            .map(|data| data.bytes())
    }
    /// Start of the bytes in the file, for models that keep buffers outside the flatbuffer;
    /// only meaningful when greater than 1.
    pub fn offset(&self) -> u64 {
        self.field::<u64>(Self::OFFSET).unwrap_or(0)
    }
    pub fn size(&self) -> u64 {
        self.field::<u64>(Self::SIZE).unwrap_or(0)
    }
}

impl Verifiable for Buffer<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("data", Self::DATA, false)?
            .visit_field::<u64>("offset", Self::OFFSET, false)?
            .visit_field::<u64>("size", Self::SIZE, false)?
            .finish();
        Ok(())
    }
}

impl<'a> Metadata<'a> {
    const NAME: VOffsetT = slot(0);
    const BUFFER: VOffsetT = slot(1);

    pub fn name(&self) -> Option<&'a [u8]> {
        self.field::<ForwardsUOffset<Vector<'a, u8>>>(Self::NAME)
            .map(|name| name.bytes())
    }
    /// Index into `Model.buffers`.
    pub fn buffer(&self) -> u32 {
        self.field::<u32>(Self::BUFFER).unwrap_or(0)
    }
}

impl Verifiable for Metadata<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<Vector<u8>>>("name", Self::NAME, false)?
            .visit_field::<u32>("buffer", Self::BUFFER, false)?
            .finish();
        Ok(())
    }
}

impl CallOnceOptions<'_> {
    const INIT_SUBGRAPH_INDEX: VOffsetT = slot(0);

    pub fn init_subgraph_index(&self) -> i32 {
        self.field::<i32>(Self::INIT_SUBGRAPH_INDEX).unwrap_or(0)
    }
}

impl Verifiable for CallOnceOptions<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i32>("init_subgraph_index", Self::INIT_SUBGRAPH_INDEX, false)?
            .finish();
        Ok(())
    }
}

impl IfOptions<'_> {
    const THEN_SUBGRAPH_INDEX: VOffsetT = slot(0);
    const ELSE_SUBGRAPH_INDEX: VOffsetT = slot(1);

    pub fn then_subgraph_index(&self) -> i32 {
        self.field::<i32>(Self::THEN_SUBGRAPH_INDEX).unwrap_or(0)
    }
    pub fn else_subgraph_index(&self) -> i32 {
        self.field::<i32>(Self::ELSE_SUBGRAPH_INDEX).unwrap_or(0)
    }
}

impl Verifiable for IfOptions<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i32>("then_subgraph_index", Self::THEN_SUBGRAPH_INDEX, false)?
            .visit_field::<i32>("else_subgraph_index", Self::ELSE_SUBGRAPH_INDEX, false)?
            .finish();
        Ok(())
    }
}

impl WhileOptions<'_> {
    const COND_SUBGRAPH_INDEX: VOffsetT = slot(0);
    const BODY_SUBGRAPH_INDEX: VOffsetT = slot(1);

    pub fn cond_subgraph_index(&self) -> i32 {
        self.field::<i32>(Self::COND_SUBGRAPH_INDEX).unwrap_or(0)
    }
    pub fn body_subgraph_index(&self) -> i32 {
        self.field::<i32>(Self::BODY_SUBGRAPH_INDEX).unwrap_or(0)
    }
}

impl Verifiable for WhileOptions<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<i32>("cond_subgraph_index", Self::COND_SUBGRAPH_INDEX, false)?
            .visit_field::<i32>("body_subgraph_index", Self::BODY_SUBGRAPH_INDEX, false)?
            .finish();
        Ok(())
    }
}

impl<'a> VarHandleOptions<'a> {
    const CONTAINER: VOffsetT = slot(0);
    const SHARED_NAME: VOffsetT = slot(1);

    pub fn container(&self) -> Option<&'a str> {
        self.field::<ForwardsUOffset<&str>>(Self::CONTAINER)
    }
    pub fn shared_name(&self) -> Option<&'a str> {
        self.field::<ForwardsUOffset<&str>>(Self::SHARED_NAME)
    }
}

impl Verifiable for VarHandleOptions<'_> {
    fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
        v.visit_table(pos)?
            .visit_field::<ForwardsUOffset<&str>>("container", Self::CONTAINER, false)?
            .visit_field::<ForwardsUOffset<&str>>("shared_name", Self::SHARED_NAME, false)?
            .finish();
        Ok(())
    }
}
