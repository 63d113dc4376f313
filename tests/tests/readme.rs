//! The README's example output is what a run gives: every ```text block of README.md that
//! starts with a `$ ./target/release/memplan ...` command is run (with the e2e build of
//! memplan, from a fresh directory, the shared corpus for `../shared/data`) and its output
//! compared line by line. The `time:` line, which varies, is left out of the README.

use memplan_tests::{describe, memplan, require_corpus, workspace_root};

/// The examples: the command's arguments and the output lines the README shows.
fn examples(readme: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut examples = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line != "```text" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|line| *line != "```").collect();
        let Some(command) = block
            .first()
            .and_then(|first| first.strip_prefix("$ ./target/release/memplan "))
        else {
            continue;
        };
        examples.push((
            command.split_whitespace().map(str::to_string).collect(),
            block[1..].iter().map(|line| line.to_string()).collect(),
        ));
    }
    examples
}

#[test]
fn the_readme_example_output_is_what_a_run_gives() {
    let Some(corpus) = require_corpus("the_readme_example_output_is_what_a_run_gives") else {
        return;
    };
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(!examples.is_empty(), "no example with output in README.md");
    for (arguments, shown) in examples {
        let arguments: Vec<String> = arguments
            .iter()
            .map(|argument| match argument.strip_prefix("../shared/data/") {
                Some(rest) => corpus.join(rest).display().to_string(),
                None => argument.clone(),
            })
            .collect();
        let output = memplan().args(&arguments).output().expect("run memplan");
        assert!(
            output.status.success(),
            "{arguments:?}: {}",
            describe(&output)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let ran: Vec<&str> = stdout
            .lines()
            .filter(|line| !line.starts_with("time: "))
            .collect();
        assert_eq!(
            ran,
            shown,
            "README.md shows other output for `memplan {}` than a run gives",
            arguments.join(" ")
        );
    }
}
