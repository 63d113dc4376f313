//! Constant bytes: which tensors may carry them, and `data_file` paths (kept inside the
//! model's directory) read once each.

use super::*;

/// Only constants carry bytes, exactly `size` of them (an alias of a constant carries none).
pub(super) fn data_problem(tensor: &Tensor) -> Option<String> {
    match (&tensor.data, tensor.kind) {
        (Some(bytes), TensorKind::Constant) if bytes.len() as u64 != tensor.size => Some(format!(
            "its data is {} bytes but the tensor is {} bytes; fix `size`/`shape` or the data",
            bytes.len(),
            tensor.size
        )),
        (Some(_), TensorKind::Constant) => None,
        (Some(_), other) => Some(format!(
            "{} tensors cannot carry data; only constants do (set \"kind\": \"constant\" or drop the data)",
            other.as_str()
        )),
        (None, TensorKind::Constant) if tensor.alias_of.is_none() => {
            Some("a constant needs its bytes: give `data` (base64) or `data_file`".into())
        }
        (None, _) => None,
    }
}

/// What every refusal of a `data_file` path tells the user to do.
pub(super) const KEEP_DATA_FILES_INSIDE: &str = "put the data file in the model's directory or a \
     subdirectory of it and give its path relative to the model file";

/// Checks the form of a `data_file` path, before it touches the file system: relative,
/// without `..`, naming a file (not empty, not ending in a directory).
pub(super) fn data_file_path(text: &str) -> std::result::Result<&Path, String> {
    let path = Path::new(text);
    let last_segment = text.rsplit(std::path::is_separator).next().unwrap_or(text);
    let problem = if text.is_empty() {
        "is empty"
    } else if path.has_root()
        || path.is_absolute()
        || matches!(path.components().next(), Some(Component::Prefix(_)))
    {
        "is absolute"
    } else if path.components().any(|c| c == Component::ParentDir) {
        "goes up a directory (`..`)"
    } else if last_segment.is_empty() || last_segment == "." {
        "names a directory, not a file"
    } else {
        // Inside the model's directory but in a hidden folder (`.ssh/`, `.gnupg/` next to a
        // model in the home directory): allowed, since a model may keep its data there, but
        // worth a word, as those files end up in the generated sources.
        if path.components().any(
            |c| matches!(c, Component::Normal(name) if name.to_string_lossy().starts_with('.')),
        ) {
            tracing::warn!(
                "data_file `{text}` lies in a hidden file or directory; its bytes will be \
                 embedded in the generated C sources: check it is the file you meant"
            );
        }
        return Ok(path);
    };
    Err(format!(
        "data_file path `{text}` {problem}; memplan reads data files only from inside the \
         model's directory: {KEEP_DATA_FILES_INSIDE}"
    ))
}

/// Binary files constant bytes come from, each read once.
///
/// Path policy: a model file may come from anyone, and the bytes read here end up in the
/// generated C sources, so a model must not be able to make memplan read (and embed in
/// firmware) any file the user can read, a private key say. A `data_file` path is therefore
/// relative, without `..` ([`data_file_path`]), resolved against the model file's directory,
/// and the file it names, once symbolic links are followed (canonicalized), must still lie
/// inside that directory (canonicalized too): a link leading out of it is refused.
///
/// Not covered: a hard link is the file itself under another name, so one placed in the
/// model's directory is read like any other file there. Making it takes write access to
/// that directory and the filesystem of the file it names, which a model file alone does
/// not give.
pub(super) struct DataFiles {
    /// The model file's directory, as given (relative paths are joined to it).
    pub(super) directory: PathBuf,
    /// `directory` canonicalized, resolved with the first data file.
    pub(super) canonical_directory: Option<PathBuf>,
    /// By canonical path, so two spellings of one file share one copy.
    pub(super) loaded: HashMap<PathBuf, Vec<u8>>,
    /// Bytes of the files loaded, and bytes copied out of them into tensors: see
    /// [`DataFiles::MAX_COPIES`].
    pub(super) loaded_bytes: u64,
    pub(super) copied_bytes: u64,
}

impl DataFiles {
    pub(super) fn new(model_path: &Path) -> Self {
        let directory = match model_path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        DataFiles {
            directory,
            canonical_directory: None,
            loaded: HashMap::new(),
            loaded_bytes: 0,
            copied_bytes: 0,
        }
    }

    /// How many times, on average, each byte of the data files may be copied into tensors.
    /// Constants normally take disjoint ranges (each byte once); a few may share bytes, but
    /// every copy costs memory, and a model naming one range for thousands of tensors would
    /// hold thousands of copies of it.
    pub(super) const MAX_COPIES: u64 = 4;

    /// The file `text` names under the path policy (see [`DataFiles`]): the path as the user
    /// will recognise it (for messages), and the canonical path to read.
    pub(super) fn resolve(
        &mut self,
        text: &str,
    ) -> std::result::Result<(PathBuf, PathBuf), String> {
        let shown = self.directory.join(data_file_path(text)?);
        let cannot_read =
            |error: std::io::Error| format!("cannot read data_file {}: {error}", shown.display());
        let directory = match &self.canonical_directory {
            Some(directory) => directory,
            None => {
                let canonical = std::fs::canonicalize(&self.directory).map_err(cannot_read)?;
                self.canonical_directory.insert(canonical)
            }
        };
        let canonical = std::fs::canonicalize(&shown).map_err(cannot_read)?;
        if !canonical.starts_with(directory) {
            // The path is relative and has no `..`: only a symbolic link can lead out.
            return Err(format!(
                "data_file path `{text}` leads through a symbolic link to {}, outside the \
                 model's directory {}; memplan refuses links that leave it: \
                 {KEEP_DATA_FILES_INSIDE}",
                canonical.display(),
                directory.display()
            ));
        }
        Ok((shown, canonical))
    }

    /// The bytes `file` names (`length` defaults to the tensor's `size`).
    pub(super) fn read(
        &mut self,
        file: &DataFileDoc<'_>,
        size: u64,
    ) -> std::result::Result<Vec<u8>, String> {
        let (path, canonical) = self.resolve(file.path.as_ref())?;
        if !self.loaded.contains_key(&canonical) {
            // Only regular files (a device such as /dev/zero never ends, a FIFO may block),
            // and none larger than a model may be.
            let bytes = crate::input::source::read_regular_file(
                &canonical,
                "a data_file",
                crate::input::source::MAX_MODEL_FILE_BYTES,
            )
            .map_err(|error| {
                // The message names the file as the model does, not by its canonical path.
                let canonical_prefix = format!("{}: ", canonical.display());
                let problem = error.message.strip_prefix(&canonical_prefix);
                format!(
                    "data_file {}: {}",
                    path.display(),
                    problem.unwrap_or(&error.message)
                )
            })?;
            self.loaded_bytes = self.loaded_bytes.saturating_add(bytes.len() as u64);
            self.loaded.insert(canonical.clone(), bytes);
        }
        let bytes = &self.loaded[&canonical];
        let offset = file.offset.map_or(0, |o| o.0);
        let length = file.length.map_or(size, |l| l.0);
        let range = offset
            .checked_add(length)
            .filter(|&end| end <= bytes.len() as u64)
            .map(|end| offset as usize..end as usize)
            .ok_or_else(|| {
                format!(
                    "data_file {}: bytes {offset}..{offset}+{length} lie outside the file ({} bytes)",
                    path.display(),
                    bytes.len()
                )
            })?;
        self.copied_bytes = self.copied_bytes.saturating_add(length);
        if self.copied_bytes > Self::MAX_COPIES.saturating_mul(self.loaded_bytes) {
            return Err(format!(
                "data_file {}: the tensors' data_file ranges add up to more than {} times the \
                 data files' size ({} bytes); each tensor should have bytes of its own, or be an \
                 alias (`alias_of`) of the tensor that has them",
                path.display(),
                Self::MAX_COPIES,
                self.loaded_bytes
            ));
        }
        Ok(bytes[range].to_vec())
    }
}
