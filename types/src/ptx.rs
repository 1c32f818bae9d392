//! Reading PTX text: the little that both the host (which data an image declares, how many
//! parameters each kernel has) and the builder (the call graph of a module) read, written once so
//! that the two read PTX the same way.

/// Whether `c` may stand in a PTX identifier after its first character: an ASCII letter or
/// digit, `_` or `$` (the first character is not a digit; a `%` may start one, as in `%r1`).
pub fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// The code of PTX text `ptx`, comments left out, as the pieces between them in order: collect
/// them (`without_comments(ptx).collect::<String>()`) for the text with its comments blanked.
///
/// A line comment (`//` to the end of its line) leaves the line's end; a block comment (`/* */`,
/// to the end of the text if it is not closed) stands as one space, so the words either side
/// stay apart. Inside a string literal (`.file 1 "src//lib.rs"`, `.pragma "nounroll"`; one
/// line at most, `\"` escaped) `//` and `/*` start no comment. A `.visible` or `.entry` in a
/// comment declares nothing, so a reader of declarations reads this text.
pub fn without_comments(ptx: &str) -> WithoutComments<'_> {
    WithoutComments { rest: ptx, space: false }
}

/// The iterator of [`without_comments`].
#[derive(Clone, Debug)]
pub struct WithoutComments<'a> {
    /// The text not read yet.
    rest: &'a str,
    /// A block comment was just left out: its space comes next.
    space: bool,
}

impl<'a> Iterator for WithoutComments<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if core::mem::take(&mut self.space) {
            return Some(" ");
        }
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let bytes = self.rest.as_bytes();
            let mut in_string = false;
            let mut at = 0;
            // Only ASCII bytes are matched, so every cut is at a character boundary.
            while at < bytes.len() {
                match (in_string, bytes[at], bytes.get(at + 1)) {
                    (true, b'\\', _) => at += 1,
                    (true, b'"' | b'\n', _) => in_string = false,
                    (false, b'"', _) => in_string = true,
                    (false, b'/', Some(b'/')) => {
                        let code = &self.rest[..at];
                        self.rest = self.rest[at..].find('\n').map_or("", |n| &self.rest[at + n..]);
                        if code.is_empty() {
                            break;
                        }
                        return Some(code);
                    }
                    (false, b'/', Some(b'*')) => {
                        let code = &self.rest[..at];
                        self.rest = self.rest[at + 2..].find("*/").map_or("", |n| &self.rest[at + 2 + n + 2..]);
                        if code.is_empty() {
                            return Some(" ");
                        }
                        self.space = true;
                        return Some(code);
                    }
                    _ => {}
                }
                at += 1;
            }
            if at >= bytes.len() {
                return Some(core::mem::take(&mut self.rest));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    fn code(ptx: &str) -> String {
        without_comments(ptx).collect()
    }

    #[test]
    fn line_comments_leave_their_line_end() {
        assert_eq!(code("a; // b\nc;"), "a; \nc;");
        assert_eq!(code("// only\n.visible .global .u32 X;"), "\n.visible .global .u32 X;");
        assert_eq!(code("a; // to the end"), "a; ");
        assert_eq!(code("//\n//\nb"), "\n\nb");
        assert_eq!(code("a / b"), "a / b", "one slash is code");
    }

    #[test]
    fn block_comments_stand_as_one_space() {
        assert_eq!(code("a/* b */c"), "a c");
        assert_eq!(code("/* x */.entry k"), " .entry k");
        assert_eq!(code("a /* line 1\n .visible .global .u32 IN_A_BLOCK; */ b"), "a   b");
        assert_eq!(code("a /* not closed .visible"), "a  ");
        assert_eq!(code("/* a // b */ c"), "  c", "a line comment inside a block comment ends with the block");
        assert_eq!(code("a // b /* c\nd */"), "a \nd */", "a block comment inside a line comment ends with the line");
    }

    #[test]
    fn strings_hold_no_comments() {
        assert_eq!(code(".file 1 \"src//lib.rs\"\n.entry k"), ".file 1 \"src//lib.rs\"\n.entry k");
        assert_eq!(code(".file 2 \"/a/*/b\" // c\nd"), ".file 2 \"/a/*/b\" \nd");
        assert_eq!(code(".pragma \"a\\\"//b\"; // c"), ".pragma \"a\\\"//b\"; ");
        // A string ends at its line, so an unclosed quote hides no comment after it.
        assert_eq!(code("\"open\n// c\nd"), "\"open\n\nd");
        assert_eq!(code("// \"in a comment\nd"), "\nd");
        assert_eq!(code("é /* ü */ ß"), "é   ß");
    }

    #[test]
    fn identifiers_are_letters_digits_underscore_dollar() {
        for c in ['a', 'Z', '0', '9', '_', '$'] {
            assert!(is_identifier_char(c), "{c}");
        }
        for c in ['.', '%', ' ', '(', ';', 'é', '-'] {
            assert!(!is_identifier_char(c), "{c}");
        }
    }
}
