//! The GBNF parser: llama.cpp's grammar format, as written in the wild, into a small AST.
//!
//! Supported (llama.cpp `grammars/README.md`): rules `name ::= …`; alternatives `|`; grouping
//! `( … )`; repetition `*` `+` `?` `{m}` `{m,}` `{m,n}`; string literals `"…"` with escapes
//! `\n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH`; character classes `[…]` with ranges and
//! negation `[^…]`; `.` (any character); `#` comments; rule names of letters, digits, `-` and
//! `_`. A rule may span several lines: it ends where the next `name ::=` starts (more permissive
//! than llama.cpp, which needs the continuation inside parentheses or after `|`).
//!
//!
//! Token terminals, as llama.cpp's parser takes them (`parse_token` in `src/llama-grammar.cpp`):
//! `<[id]>` is the token with that id; `<…>` (anything up to the next `>`, e.g. `<|im_end|>`,
//! `<think>`) is the token whose string that is, resolved against the vocabulary when an engine
//! is built ([`Expr::Token`] keeps the name); `!` before either is its negation, any one token
//! but that one. They match whole tokens by id, never bytes: see the `engine` module (`CfgConstraint`).

use super::{CfgError, CfgErrorKind};

/// A position in the grammar text (1-based line and column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
}

/// A GBNF expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// One of several sequences.
    Alt(Vec<Expr>),
    /// A sequence (empty = the empty string).
    Seq(Vec<Expr>),
    /// A string literal, as UTF-8 bytes.
    Literal(Vec<u8>),
    /// A character class: inclusive code-point ranges, possibly negated.
    Class {
        /// The ranges as written.
        ranges: Vec<(u32, u32)>,
        /// `[^…]`.
        negated: bool,
    },
    /// `.`: any character.
    Any,
    /// A reference to a rule.
    Ref {
        /// The rule's name.
        name: String,
        /// Where it is referenced.
        pos: Pos,
    },
    /// A token terminal: `<[id]>`, `<name>`, or their negation `!<…>` (see the module docs).
    Token {
        /// Which token.
        token: TokenRef,
        /// `!<…>`: any one token but this one.
        negated: bool,
        /// Where it is written.
        pos: Pos,
    },
    /// `e{min,max}` (`*` is `{0,}`, `+` is `{1,}`, `?` is `{0,1}`).
    Repeat {
        /// The repeated expression.
        expr: Box<Expr>,
        /// Least count.
        min: u32,
        /// Greatest count (`None` = unbounded).
        max: Option<u32>,
    },
}

/// The token a token terminal names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenRef {
    /// `<[id]>`.
    Id(u32),
    /// `<…>`: the token's string, brackets included (`<|im_end|>`).
    Name(String),
}

impl std::fmt::Display for TokenRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenRef::Id(id) => write!(f, "<[{id}]>"),
            TokenRef::Name(n) => f.write_str(n),
        }
    }
}

/// A rule `name ::= expr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule's name.
    pub name: String,
    /// Its definition.
    pub expr: Expr,
    /// Where it is defined.
    pub pos: Pos,
}

fn write_char(f: &mut std::fmt::Formatter<'_>, c: u32, in_class: bool) -> std::fmt::Result {
    match char::from_u32(c) {
        Some('\n') => f.write_str("\\n"),
        Some('\r') => f.write_str("\\r"),
        Some('\t') => f.write_str("\\t"),
        Some('\\') => f.write_str("\\\\"),
        Some('"') if !in_class => f.write_str("\\\""),
        Some(c @ (']' | '^' | '-')) if in_class => write!(f, "\\{c}"),
        Some(c) if !c.is_control() => write!(f, "{c}"),
        _ if c <= 0xFF => write!(f, "\\x{c:02X}"),
        _ if c <= 0xFFFF => write!(f, "\\u{c:04X}"),
        _ => write!(f, "\\U{c:08X}"),
    }
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Alt(alts) => {
                for (i, a) in alts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{a}")?;
                }
                Ok(())
            }
            Expr::Seq(items) => {
                if items.is_empty() {
                    return f.write_str("\"\"");
                }
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    match e {
                        Expr::Alt(_) => write!(f, "({e})")?,
                        _ => write!(f, "{e}")?,
                    }
                }
                Ok(())
            }
            Expr::Literal(bytes) => {
                f.write_str("\"")?;
                for c in String::from_utf8_lossy(bytes).chars() {
                    write_char(f, c as u32, false)?;
                }
                f.write_str("\"")
            }
            Expr::Class { ranges, negated } => {
                f.write_str(if *negated { "[^" } else { "[" })?;
                for &(lo, hi) in ranges {
                    write_char(f, lo, true)?;
                    if hi != lo {
                        f.write_str("-")?;
                        write_char(f, hi, true)?;
                    }
                }
                f.write_str("]")
            }
            Expr::Any => f.write_str("."),
            Expr::Ref { name, .. } => f.write_str(name),
            Expr::Token { token, negated, .. } => {
                write!(f, "{}{token}", if *negated { "!" } else { "" })
            }
            Expr::Repeat { expr, min, max } => {
                match &**expr {
                    Expr::Alt(_) | Expr::Seq(_) | Expr::Repeat { .. } => write!(f, "({expr})")?,
                    _ => write!(f, "{expr}")?,
                }
                match (min, max) {
                    (0, None) => f.write_str("*"),
                    (1, None) => f.write_str("+"),
                    (0, Some(1)) => f.write_str("?"),
                    (m, None) => write!(f, "{{{m},}}"),
                    (m, Some(n)) if m == n => write!(f, "{{{m}}}"),
                    (m, Some(n)) => write!(f, "{{{m},{n}}}"),
                }
            }
        }
    }
}

struct Parser {
    chars: Vec<(usize, char)>,
    i: usize,
    /// Char index at which each line starts (a position is a binary search, not a rescan:
    /// a 50,000-rule grammar parses in linear time).
    line_starts: Vec<usize>,
}

/// Largest `{m,n}` bound accepted by the parser (the compiler also limits the grammar size).
pub const MAX_REPEAT: u32 = 10_000;

/// Parse GBNF text into rules (in order of definition; a name defined twice is an error).
///
/// # Errors
/// [`CfgErrorKind::Syntax`] with line and column; [`CfgErrorKind::DuplicateRule`].
pub fn parse(src: &str) -> Result<Vec<Rule>, CfgError> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let line_starts = std::iter::once(0)
        .chain(chars.iter().enumerate().filter(|(_, &(_, c))| c == '\n').map(|(k, _)| k + 1))
        .collect();
    let mut p = Parser { chars, i: 0, line_starts };
    let mut rules: Vec<Rule> = Vec::new();
    let mut first_line: rustc_hash::FxHashMap<String, usize> = Default::default();
    loop {
        p.skip_ws();
        if p.at_end() {
            break;
        }
        let pos = p.pos();
        let name = p.name().ok_or_else(|| p.err("expected a rule name"))?;
        p.skip_ws();
        if !p.eat_str("::=") {
            return Err(p.err(&format!("expected '::=' after rule name '{name}'")));
        }
        let expr = p.alternatives(0)?;
        if let Some(&first_line) = first_line.get(&name) {
            return Err(CfgError::new(CfgErrorKind::DuplicateRule {
                name,
                line: pos.line,
                first_line,
            }));
        }
        first_line.insert(name.clone(), pos.line);
        rules.push(Rule { name, expr, pos });
    }
    Ok(rules)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Parser {
    fn at_end(&self) -> bool {
        self.i >= self.chars.len()
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).map(|&(_, c)| c)
    }
    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).map(|&(_, c)| c)
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.peek();
        self.i += 1;
        c
    }
    fn pos(&self) -> Pos {
        let i = self.i.min(self.chars.len());
        let line = self.line_starts.partition_point(|&start| start <= i);
        Pos { line, column: i - self.line_starts[line - 1] + 1 }
    }
    fn err(&self, message: &str) -> CfgError {
        let p = self.pos();
        CfgError::new(CfgErrorKind::Syntax {
            line: p.line,
            column: p.column,
            message: message.to_string(),
        })
    }
    fn eat_str(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        if self.chars[self.i.min(self.chars.len())..].iter().take(n).map(|&(_, c)| c).eq(s.chars())
        {
            self.i += n;
            true
        } else {
            false
        }
    }
    /// Skip whitespace (newlines included) and comments.
    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.i += 1;
                }
            } else if c.is_whitespace() {
                self.i += 1;
            } else {
                break;
            }
        }
    }
    fn name(&mut self) -> Option<String> {
        let start = self.i;
        while self.peek().is_some_and(is_name_char) {
            self.i += 1;
        }
        (self.i > start).then(|| self.chars[start..self.i].iter().map(|&(_, c)| c).collect())
    }
    /// Is the parser at `name ::=` (the start of the next rule)?
    fn at_rule_start(&self) -> bool {
        let mut k = self.i;
        while self.chars.get(k).is_some_and(|&(_, c)| is_name_char(c)) {
            k += 1;
        }
        if k == self.i {
            return false;
        }
        while self
            .chars
            .get(k)
            .is_some_and(|&(_, c)| c == ' ' || c == '\t' || c == '\r' || c == '\n')
        {
            k += 1;
        }
        self.chars[k.min(self.chars.len())..].iter().take(3).map(|&(_, c)| c).eq("::=".chars())
    }

    fn alternatives(&mut self, depth: usize) -> Result<Expr, CfgError> {
        if depth > 200 {
            return Err(self.err("groups nested too deeply"));
        }
        let mut alts = vec![self.sequence(depth)?];
        loop {
            self.skip_ws();
            if self.peek() == Some('|') {
                self.i += 1;
                alts.push(self.sequence(depth)?);
            } else {
                break;
            }
        }
        Ok(if alts.len() == 1 { alts.pop().expect("one") } else { Expr::Alt(alts) })
    }

    fn sequence(&mut self, depth: usize) -> Result<Expr, CfgError> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else { break };
            if c == '|' || c == ')' {
                break;
            }
            if is_name_char(c) && self.at_rule_start() {
                break;
            }
            let atom = self.atom(depth)?;
            let atom = self.postfix(atom)?;
            items.push(atom);
        }
        Ok(if items.len() == 1 { items.pop().expect("one") } else { Expr::Seq(items) })
    }

    fn atom(&mut self, depth: usize) -> Result<Expr, CfgError> {
        let pos = self.pos();
        match self.peek().expect("caller checked") {
            '"' => {
                self.i += 1;
                let mut bytes = Vec::new();
                loop {
                    match self.peek() {
                        None => return Err(self.err("unterminated string literal")),
                        Some('"') => {
                            self.i += 1;
                            break;
                        }
                        Some('\\') => {
                            let c = self.escape()?;
                            let mut buf = [0u8; 4];
                            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        Some(c) => {
                            self.i += 1;
                            let mut buf = [0u8; 4];
                            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                    }
                }
                Ok(Expr::Literal(bytes))
            }
            '[' => {
                self.i += 1;
                let negated = if self.peek() == Some('^') {
                    self.i += 1;
                    true
                } else {
                    false
                };
                let mut ranges = Vec::new();
                loop {
                    let lo = match self.peek() {
                        None => return Err(self.err("unterminated character class")),
                        Some(']') => {
                            self.i += 1;
                            break;
                        }
                        Some('\\') => self.escape()?,
                        Some(c) => {
                            self.i += 1;
                            c
                        }
                    };
                    let hi =
                        if self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']') {
                            self.i += 1;
                            match self.peek() {
                                Some('\\') => self.escape()?,
                                Some(c) => {
                                    self.i += 1;
                                    c
                                }
                                None => return Err(self.err("unterminated character class")),
                            }
                        } else {
                            lo
                        };
                    if (hi as u32) < (lo as u32) {
                        return Err(
                            self.err(&format!("character class range {lo:?}-{hi:?} is reversed"))
                        );
                    }
                    ranges.push((lo as u32, hi as u32));
                }
                Ok(Expr::Class { ranges, negated })
            }
            '(' => {
                self.i += 1;
                let e = self.alternatives(depth + 1)?;
                self.skip_ws();
                if self.bump() != Some(')') {
                    return Err(CfgError::new(CfgErrorKind::Syntax {
                        line: pos.line,
                        column: pos.column,
                        message: "unclosed '('".into(),
                    }));
                }
                Ok(e)
            }
            '.' => {
                self.i += 1;
                Ok(Expr::Any)
            }
            '<' | '!' => self.token(pos),
            c if is_name_char(c) => {
                let name = self.name().expect("name char");
                Ok(Expr::Ref { name, pos })
            }
            c => Err(self.err(&format!("unexpected character {c:?}"))),
        }
    }

    /// A token terminal at `<` or `!<` (llama.cpp's `parse_token`).
    fn token(&mut self, pos: Pos) -> Result<Expr, CfgError> {
        let negated = self.peek() == Some('!');
        if negated {
            self.i += 1;
            if self.peek() != Some('<') {
                return Err(self.err("expected '<' after '!' (a negated token, '!<[id]>')"));
            }
        }
        self.i += 1; // '<'
        let token = if self.peek() == Some('[') {
            self.i += 1;
            let start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            let digits: String = self.chars[start..self.i].iter().map(|&(_, c)| c).collect();
            let id =
                digits.parse::<u32>().map_err(|_| self.err("expected a token id in '<[id]>'"))?;
            if !self.eat_str("]>") {
                return Err(self.err("expected ']>' after the token id"));
            }
            TokenRef::Id(id)
        } else {
            let start = self.i - 1;
            while self.peek().is_some_and(|c| c != '>' && c != '\n') {
                self.i += 1;
            }
            if self.bump() != Some('>') {
                return Err(CfgError::new(CfgErrorKind::Syntax {
                    line: pos.line,
                    column: pos.column,
                    message: "unterminated token name (expected '>')".into(),
                }));
            }
            let name: String = self.chars[start..self.i].iter().map(|&(_, c)| c).collect();
            if name.len() <= 2 {
                return Err(self.err("empty token name '<>'"));
            }
            TokenRef::Name(name)
        };
        Ok(Expr::Token { token, negated, pos })
    }

    fn number(&mut self) -> Result<u32, CfgError> {
        self.skip_ws();
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let s: String = self.chars[start..self.i].iter().map(|&(_, c)| c).collect();
        match s.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(n),
            Ok(_) => Err(self.err(&format!("repetition bound above {MAX_REPEAT}"))),
            Err(_) => Err(self.err("expected a number")),
        }
    }

    fn postfix(&mut self, mut atom: Expr) -> Result<Expr, CfgError> {
        loop {
            // Postfix operators bind to the atom just before them, without whitespace between
            // in practice; we allow spaces, as llama.cpp does.
            let save = self.i;
            while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
                self.i += 1;
            }
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => {
                    self.i += 1;
                    let min = self.number()?;
                    self.skip_ws();
                    let max = if self.peek() == Some(',') {
                        self.i += 1;
                        self.skip_ws();
                        if self.peek() == Some('}') {
                            None
                        } else {
                            Some(self.number()?)
                        }
                    } else {
                        Some(min)
                    };
                    self.skip_ws();
                    if self.peek() != Some('}') {
                        return Err(self.err("expected '}'"));
                    }
                    if max.is_some_and(|m| m < min) {
                        return Err(self.err(&format!(
                            "repetition {{{min},{}}} has max < min",
                            max.unwrap_or(0)
                        )));
                    }
                    (min, max)
                }
                _ => {
                    self.i = save;
                    return Ok(atom);
                }
            };
            self.i += 1;
            atom = Expr::Repeat { expr: Box::new(atom), min, max };
        }
    }

    /// An escape sequence starting at `\`.
    fn escape(&mut self) -> Result<char, CfgError> {
        self.i += 1; // '\'
        let c = self.bump().ok_or_else(|| self.err("escape at end of input"))?;
        let hex = |p: &mut Self, n: usize| -> Result<char, CfgError> {
            let mut v = 0u32;
            for _ in 0..n {
                let d =
                    p.peek().and_then(|c| c.to_digit(16)).ok_or_else(|| p.err("bad hex escape"))?;
                p.i += 1;
                v = v * 16 + d;
            }
            char::from_u32(v).ok_or_else(|| p.err(&format!("escape U+{v:X} is not a character")))
        };
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            '\\' | '"' | '[' | ']' | '-' | '^' | '/' | '\'' | '.' | '|' | '(' | ')' | '*' | '+'
            | '?' | '{' | '}' => c,
            other => return Err(self.err(&format!("unknown escape '\\{other}'"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_constructs() {
        let rules = parse(
            "# comment\nroot ::= a+ | \"x\\n\" [^a-z\\]] . (b c)? d{2,3}\n a ::= \"a\"\nb::=\"b\" c ::= [\\x41-\\u0042] d ::= \"d\"{2,}",
        )
        .unwrap();
        assert_eq!(rules.len(), 5);
        assert_eq!(rules[0].name, "root");
        assert_eq!(rules[2].name, "b");
        assert!(
            matches!(rules[3].expr, Expr::Class { ref ranges, negated: false } if ranges == &[(0x41, 0x42)])
        );
    }

    #[test]
    fn parses_token_terminals() {
        let rules = parse("root ::= <[12]> !<|im_end|> <think>* !<[3]>").unwrap();
        let Expr::Seq(items) = &rules[0].expr else { panic!("a sequence") };
        assert_eq!(items.len(), 4);
        assert!(matches!(&items[0], Expr::Token { token: TokenRef::Id(12), negated: false, .. }));
        assert!(
            matches!(&items[1], Expr::Token { token: TokenRef::Name(n), negated: true, .. } if n == "<|im_end|>")
        );
        assert!(matches!(&items[2], Expr::Repeat { .. }));
        assert_eq!(rules[0].expr.to_string(), "<[12]> !<|im_end|> <think>* !<[3]>");
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("root ::= \"abc").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = parse("root ::= a\nb ::= (x").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = parse("root ::= <[12x]>").unwrap_err();
        assert!(e.to_string().contains("']>'"), "{e}");
        let e = parse("root ::= !\"a\"").unwrap_err();
        assert!(e.to_string().contains("negated token"), "{e}");
        let e = parse("root ::= <|im_end|").unwrap_err();
        assert!(e.to_string().contains("unterminated token"), "{e}");
        let e = parse("root ::= \"a\"\nroot ::= \"b\"").unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
