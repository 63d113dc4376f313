//! Writing MiniMalloc CSV files: a problem (`id,lower,upper,size,alignment`), which memplan
//! and MiniMalloc read, and a solution (`id,lower,upper,size,offset`), the form MiniMalloc
//! writes its answers in. Lifetimes are half-open, `[lower, upper)`.

use std::fmt::{Display, Write};

/// A problem file: one line per `(id, lower, upper, size, alignment)`.
pub fn write_problem<Id: Display>(
    rows: impl IntoIterator<Item = (Id, u64, u64, u64, u64)>,
) -> String {
    write("id,lower,upper,size,alignment", rows)
}

/// A solution file: one line per `(id, lower, upper, size, offset)`.
pub fn write_solution<Id: Display>(
    rows: impl IntoIterator<Item = (Id, u64, u64, u64, u64)>,
) -> String {
    write("id,lower,upper,size,offset", rows)
}

fn write<Id: Display>(
    header: &str,
    rows: impl IntoIterator<Item = (Id, u64, u64, u64, u64)>,
) -> String {
    let mut text = format!("{header}\n");
    for (id, lower, upper, size, last) in rows {
        // Writing to a String cannot fail.
        let _ = writeln!(text, "{id},{lower},{upper},{size},{last}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_as_written() {
        let problem = write_problem([("a", 0, 3, 16, 8), ("b", 2, 5, 4, 1)]);
        assert_eq!(
            problem,
            "id,lower,upper,size,alignment\na,0,3,16,8\nb,2,5,4,1\n"
        );
        let solution = write_solution([(7, 1, 2, 32, 64)]);
        assert_eq!(solution, "id,lower,upper,size,offset\n7,1,2,32,64\n");
        let dir = std::env::temp_dir().join(format!("memplan-minimalloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("solution.csv");
        std::fs::write(&path, &solution).unwrap();
        let read = crate::read_file(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            read,
            [crate::Buffer {
                id: "7".into(),
                lower: 1,
                upper: 2,
                size: 32,
                alignment: None,
                offset: Some(64),
            }]
        );
    }
}
