//! The packet description language, written the way scapy users write
//! packets: layers joined by `/`, each with `field=value` pairs in
//! parentheses:
//!
//! ```text
//! Ether(src=40:a6:b7:0b:e9:b1,dst=fa:16:3e:40:4d:7d)/Dot1Q(vlan=177)/
//! IP(src=172.17.2.163,dst=172.17.2.60)/UDP(sport=57025,dport=6081)/
//! GENEVE(vni=6,opt=ovn(ingress=3,egress=2))/Ether()/IP(src=192.168.2.1-192.168.2.254)/UDP()
//! ```
//!
//! This module only splits the text into layers, fields and values, each
//! with its byte offset so that errors can point at the offending token;
//! what a field means and which values it takes is [`crate::layer`]'s.

use std::fmt;

/// A value as written, before its field gives it a type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unquoted text: a number, address, name, `A-B` range or `random`.
    Word(String),
    /// A quoted string ('IPv4', "x").
    Str(String),
    /// A `b"..."` byte string with `\xNN` escapes.
    Bytes(Vec<u8>),
    /// `[a, b, c]`: one of several values, one flow each.
    List(Vec<Spanned<Value>>),
    /// `name(field=value, ...)`, e.g. `ovn(ingress=3,egress=2)`.
    Call(Spanned<String>, Vec<Field>),
}

/// Something with the byte offset where it starts in the description.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub at: usize,
    pub v: T,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: Spanned<String>,
    pub value: Spanned<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    pub name: Spanned<String>,
    pub fields: Vec<Field>,
}

/// A description that could not be read: what is wrong and where.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub at: usize,
    pub msg: String,
}

impl SpecError {
    pub fn new(at: usize, msg: impl Into<String>) -> SpecError {
        SpecError {
            at,
            msg: msg.into(),
        }
    }

    /// The message with the description and a caret under the offending
    /// byte, as compilers show it.
    pub fn show(&self, text: &str) -> String {
        let col = text[..self.at.min(text.len())].chars().count();
        format!(
            "{} (at character {})\n  {}\n  {}^",
            self.msg,
            col + 1,
            text,
            " ".repeat(col)
        )
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.msg, self.at)
    }
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.s[self.at..].chars().next()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.at += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn require(&mut self, c: char, what: &str) -> Result<(), SpecError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(SpecError::new(
                self.at,
                match self.peek() {
                    Some(x) => format!("expected {what}, found '{x}'"),
                    None => format!("expected {what}, found the end"),
                },
            ))
        }
    }

    fn ident(&mut self, what: &str) -> Result<Spanned<String>, SpecError> {
        self.skip_ws();
        let start = self.at;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                self.at += 1;
            } else {
                break;
            }
        }
        if start == self.at {
            return Err(SpecError::new(
                start,
                match self.peek() {
                    Some(x) => format!("expected {what}, found '{x}'"),
                    None => format!("expected {what}, found the end"),
                },
            ));
        }
        Ok(Spanned {
            at: start,
            v: self.s[start..self.at].to_string(),
        })
    }

    fn fields(&mut self, close: char) -> Result<Vec<Field>, SpecError> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            let name = self.ident("a field name")?;
            self.require('=', &format!("'=' after field '{}'", name.v))?;
            let value = self.value()?;
            out.push(Field { name, value });
            if self.eat(close) {
                return Ok(out);
            }
            self.require(',', &format!("',' or '{close}'"))?;
        }
    }

    fn quoted(&mut self, q: char) -> Result<String, SpecError> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(SpecError::new(start, "string not closed")),
                Some(c) if c == q => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(c) => {
                    out.push(c);
                    self.at += c.len_utf8();
                }
            }
        }
    }

    fn bytes(&mut self) -> Result<Vec<u8>, SpecError> {
        // b"..." or b'...': printable ASCII and \xNN, \\, \", \', \n, \r, \t, \0.
        self.at += 1;
        let q = self.peek().unwrap_or('"');
        let start = self.at;
        let text = self.quoted(q)?;
        let mut out = Vec::new();
        let mut it = text.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if c != '\\' {
                if !c.is_ascii() {
                    return Err(SpecError::new(
                        start + 1 + i,
                        "a byte string holds ASCII and \\xNN escapes only",
                    ));
                }
                out.push(c as u8);
                continue;
            }
            match it.next() {
                Some((_, 'x')) => {
                    let h: String = (0..2).filter_map(|_| it.next().map(|(_, c)| c)).collect();
                    let b = u8::from_str_radix(&h, 16)
                        .map_err(|_| SpecError::new(start + 1 + i, "\\x needs two hex digits"))?;
                    out.push(b);
                }
                Some((_, 'n')) => out.push(b'\n'),
                Some((_, 'r')) => out.push(b'\r'),
                Some((_, 't')) => out.push(b'\t'),
                Some((_, '0')) => out.push(0),
                Some((_, c @ ('\\' | '"' | '\''))) => out.push(c as u8),
                _ => {
                    return Err(SpecError::new(
                        start + 1 + i,
                        "unknown escape: use \\xNN, \\\\, \\\", \\', \\n, \\r, \\t or \\0",
                    ))
                }
            }
        }
        Ok(out)
    }

    fn value(&mut self) -> Result<Spanned<Value>, SpecError> {
        self.skip_ws();
        let at = self.at;
        let rest = &self.s[at..];
        let v = match self.peek() {
            Some(q @ ('\'' | '"')) => Value::Str(self.quoted(q)?),
            Some('b') if rest[1..].starts_with(['"', '\'']) => Value::Bytes(self.bytes()?),
            Some('[') => {
                self.at += 1;
                let mut items = Vec::new();
                if !self.eat(']') {
                    loop {
                        items.push(self.value()?);
                        if self.eat(']') {
                            break;
                        }
                        self.require(',', "',' or ']'")?;
                    }
                }
                if items.is_empty() {
                    return Err(SpecError::new(at, "an empty list gives no value"));
                }
                Value::List(items)
            }
            _ => {
                // A word runs to the next delimiter; a name followed by '('
                // is a call.
                let end = rest
                    .find([',', ')', ']', '(', '/'])
                    .map_or(self.s.len(), |i| at + i);
                let word = self.s[at..end].trim_end();
                if word.is_empty() {
                    return Err(SpecError::new(at, "expected a value"));
                }
                self.at = at + word.len();
                if self.s[end..].starts_with('(')
                    && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.at = end + 1;
                    let fields = self.fields(')')?;
                    Value::Call(
                        Spanned {
                            at,
                            v: word.to_string(),
                        },
                        fields,
                    )
                } else if self.s[end..].starts_with(['(', '/']) {
                    return Err(SpecError::new(
                        end,
                        format!("unexpected '{}' in a value", &self.s[end..end + 1]),
                    ));
                } else {
                    Value::Word(word.to_string())
                }
            }
        };
        Ok(Spanned { at, v })
    }
}

/// Split a description into layers. Whitespace and line breaks between
/// tokens are allowed (profile files spread a packet over lines).
pub fn parse(s: &str) -> Result<Vec<LayerSpec>, SpecError> {
    let mut p = Parser { s, at: 0 };
    let mut layers = Vec::new();
    loop {
        let name = p.ident("a layer name (e.g. Ether, IP, UDP, GENEVE)")?;
        let fields = if p.eat('(') {
            p.fields(')')?
        } else {
            Vec::new()
        };
        layers.push(LayerSpec { name, fields });
        p.skip_ws();
        if p.at == s.len() {
            return Ok(layers);
        }
        p.require('/', "'/' between layers")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(v: &Spanned<Value>) -> &str {
        match &v.v {
            Value::Word(w) => w,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_articles_packet_as_written_there() {
        let text = r#"Ether(src='40:a6:b7:0b:e9:b1',dst='fa:16:3e:40:4d:7d')/
Dot1Q(vlan=177,type='IPv4')/
IP(proto=17,src='172.17.2.163',dst='172.17.2.60')/
UDP(sport=57025,dport=6081)/
GENEVE(optionlen=2,proto=0x6558,vni=6,options_class=0x0102,options_type=0x80,options_len=1,options_data=b"\x00\x03\x00\x02")/
Ether(src='fa:16:3e:7f:a1:49',dst='fa:16:3e:a0:1f:28',type=0x0800)/
IP(src='192.168.2.1',dst='192.168.2.181')/
UDP(dport=1000,sport=2000)/pad"#;
        let l = parse(text).unwrap();
        let names: Vec<&str> = l.iter().map(|x| x.name.v.as_str()).collect();
        assert_eq!(
            names,
            ["Ether", "Dot1Q", "IP", "UDP", "GENEVE", "Ether", "IP", "UDP", "pad"]
        );
        assert_eq!(l[1].fields[1].value.v, Value::Str("IPv4".into()));
        let g = &l[4].fields;
        assert_eq!(g[6].name.v, "options_data");
        assert_eq!(g[6].value.v, Value::Bytes(vec![0, 3, 0, 2]));
        assert_eq!(word(&g[2].value), "6");
    }

    #[test]
    fn unquoted_addresses_ranges_lists_and_calls() {
        let l = parse(
            "Ether(src=40:a6:b7:0b:e9:b1)/IP(src=192.168.2.1-192.168.2.254,dst=fe80::1)/UDP(sport=random)/GENEVE(vni=[1, 5,9],opt=ovn(ingress=3,egress=2))",
        )
        .unwrap();
        assert_eq!(word(&l[0].fields[0].value), "40:a6:b7:0b:e9:b1");
        assert_eq!(word(&l[1].fields[0].value), "192.168.2.1-192.168.2.254");
        assert_eq!(word(&l[1].fields[1].value), "fe80::1");
        assert_eq!(word(&l[2].fields[0].value), "random");
        let Value::List(items) = &l[3].fields[0].value.v else {
            panic!()
        };
        assert_eq!(items.iter().map(word).collect::<Vec<_>>(), ["1", "5", "9"]);
        let Value::Call(name, args) = &l[3].fields[1].value.v else {
            panic!()
        };
        assert_eq!(name.v, "ovn");
        assert_eq!(args[1].name.v, "egress");
    }

    #[test]
    fn errors_point_at_the_offending_token() {
        let cases = [
            ("Ether(src=1", 11, "expected ',' or ')'"),
            ("Ether()/", 8, "expected a layer name"),
            ("Ether()//IP()", 8, "expected a layer name"),
            ("IP(src)", 6, "expected '=' after field 'src'"),
            ("IP(src=)", 7, "expected a value"),
            ("Raw(load=b\"\\q\")", 11, "unknown escape"),
            ("Raw(load='abc)", 9, "string not closed"),
            ("IP() UDP()", 5, "expected '/' between layers"),
            ("GENEVE(vni=[])", 11, "an empty list"),
        ];
        for (text, at, msg) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.msg.contains(msg), "{text}: {e}");
        }
        let e = parse("IP(src=)").unwrap_err();
        assert_eq!(
            e.show("IP(src=)"),
            "expected a value (at character 8)\n  IP(src=)\n         ^"
        );
    }
}
