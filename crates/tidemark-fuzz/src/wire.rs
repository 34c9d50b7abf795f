//! A protobuf-wire-aware mutator: it parses an encoded message into fields
//! (recursing into embedded messages), swaps in hostile values, drops,
//! duplicates and invents fields, changes wire types, and finally sometimes
//! corrupts the bytes themselves. One mutator serves every request type, so
//! every decoder and validator is reached through the real server.

/// A small deterministic PRNG (splitmix64): runs replay from `--seed`.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeded.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `1/n`.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items`.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One field's value as it appears on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32(u32),
}

/// A field: number and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub number: u64,
    pub value: Value,
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut result = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(result);
        }
    }
    None
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Parses a message into its fields; `None` if it is not well-formed wire
/// data (groups are not used by tidemark and count as malformed).
pub(crate) fn parse(bytes: &[u8]) -> Option<Vec<Field>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let key = read_varint(bytes, &mut at)?;
        let number = key >> 3;
        if number == 0 {
            return None;
        }
        let value = match key & 7 {
            0 => Value::Varint(read_varint(bytes, &mut at)?),
            1 => {
                let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
                at += 8;
                Value::Fixed64(u64::from_le_bytes(raw))
            }
            2 => {
                let len = usize::try_from(read_varint(bytes, &mut at)?).ok()?;
                let end = at.checked_add(len)?;
                let payload = bytes.get(at..end)?.to_vec();
                at = end;
                Value::Bytes(payload)
            }
            5 => {
                let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
                at += 4;
                Value::Fixed32(u32::from_le_bytes(raw))
            }
            _ => return None,
        };
        fields.push(Field { number, value });
    }
    Some(fields)
}

/// Encodes fields back to wire bytes.
pub(crate) fn encode(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        let wire_type = match f.value {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Bytes(_) => 2,
            Value::Fixed32(_) => 5,
        };
        write_varint(&mut out, (f.number << 3) | wire_type);
        match &f.value {
            Value::Varint(v) => write_varint(&mut out, *v),
            Value::Fixed64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Bytes(b) => {
                write_varint(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            }
            Value::Fixed32(v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

/// Integers at the edges of every type a request field has (as varints:
/// negative numbers are their 64-bit two's complement).
const INTERESTING_INTS: [i64; 20] = [
    0,
    1,
    2,
    -1,
    -2,
    7,
    99,
    1000,
    i8::MAX as i64,
    i32::MAX as i64,
    i32::MIN as i64,
    u32::MAX as i64,
    i32::MAX as i64 + 1,
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
    i64::MIN + 1,
    315_576_000_000,
    315_576_000_001,
    999_999_999,
];

/// Strings that have broken services: empty, huge, control and
/// direction-override characters, path tricks, Unicode, regex bombs,
/// page-token lookalikes, SQL.
fn interesting_string(rng: &mut Rng) -> Vec<u8> {
    const FIXED: [&str; 34] = [
        "",
        " ",
        "a",
        "main",
        "db.orders",
        "db.fuzz",
        "DB.Orders",
        "c1",
        "db..t",
        ".",
        "..",
        "../../etc/passwd",
        "a/b",
        "\0",
        "a\0b",
        "\u{7}",
        "\n",
        "\u{202e}evil",
        "é.ü",
        "🦀.🦀",
        "(a+)+$",
        "(a|aa)*c",
        "(x+x+)+y",
        ".*",
        "[",
        "a{1000}{1000}",
        "(?i)",
        "\\",
        "%s%n%x",
        "'; DROP TABLE consumer_keys; --",
        "00000000-0000-0000-0000-000000000000",
        "0196a3b2-7c3d-7000-8000-000000000000",
        "not-a-token",
        "branch-x",
    ];
    match rng.below(8) {
        0 => "a".repeat(*rng.pick(&[129, 256, 1025, 5000, 70_000])).into_bytes(),
        1 => {
            // random bytes, often not UTF-8
            let len = rng.below(40);
            (0..len).map(|_| rng.next() as u8).collect()
        }
        2 => format!("{}{}", "(a*)*".repeat(rng.below(50) + 1), "b").into_bytes(),
        _ => rng.pick(&FIXED).as_bytes().to_vec(),
    }
}

/// Mutates an encoded message in place (`depth` bounds recursion).
pub(crate) fn mutate(bytes: &[u8], rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = match parse(bytes) {
        Some(mut fields) => {
            for _ in 0..=rng.below(2) {
                mutate_fields(&mut fields, rng, 0);
            }
            encode(&fields)
        }
        None => bytes.to_vec(),
    };
    if rng.one_in(6) {
        corrupt(&mut out, rng, seeds);
    }
    out
}

/// Counts the varints of a message, embedded messages included.
fn count_varints(fields: &[Field], depth: u32) -> usize {
    fields
        .iter()
        .map(|f| match &f.value {
            Value::Varint(_) => 1,
            Value::Bytes(payload) if depth < 4 && !payload.is_empty() => {
                parse(payload).map_or(0, |inner| count_varints(&inner, depth + 1))
            }
            _ => 0,
        })
        .sum()
}

/// Sets the `n`-th varint (in [`count_varints`] order) to `value`.
fn set_varint(fields: &mut [Field], n: &mut usize, value: u64, depth: u32) -> bool {
    for f in fields.iter_mut() {
        match &mut f.value {
            Value::Varint(v) => {
                if *n == 0 {
                    *v = value;
                    return true;
                }
                *n -= 1;
            }
            Value::Bytes(payload) if depth < 4 && !payload.is_empty() => {
                if let Some(mut inner) = parse(payload)
                    && set_varint(&mut inner, n, value, depth + 1)
                {
                    *payload = encode(&inner);
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

fn mutate_fields(fields: &mut Vec<Field>, rng: &mut Rng, depth: u32) {
    // Often: one number anywhere in the message (however deep) set to an
    // edge value, everything else left valid, so the value reaches the
    // rules rather than stopping at the first validation.
    if depth == 0 && rng.one_in(3) {
        let count = count_varints(fields, 0);
        if count > 0 {
            let mut n = rng.below(count);
            let value = *rng.pick(&INTERESTING_INTS) as u64;
            set_varint(fields, &mut n, value, 0);
            return;
        }
    }
    if fields.is_empty() || rng.one_in(8) {
        fields.push(random_field(rng));
        return;
    }
    let i = rng.below(fields.len());
    match rng.below(10) {
        0 => {
            fields.remove(i);
        }
        1 => {
            let copy = fields[i].clone();
            fields.insert(i, copy);
        }
        2 => {
            // the same number with another wire type: a decode error
            let number = fields[i].number;
            fields[i] = Field {
                number,
                value: random_field(rng).value,
            };
        }
        _ => {
            let field = &mut fields[i];
            field.value = match &field.value {
                Value::Varint(_) => Value::Varint(*rng.pick(&INTERESTING_INTS) as u64),
                Value::Fixed64(_) => Value::Fixed64(rng.next()),
                Value::Fixed32(_) => Value::Fixed32(rng.next() as u32),
                Value::Bytes(payload) => {
                    // an embedded message: mutate inside it
                    match parse(payload) {
                        Some(mut inner) if depth < 4 && !payload.is_empty() && !rng.one_in(4) => {
                            mutate_fields(&mut inner, rng, depth + 1);
                            Value::Bytes(encode(&inner))
                        }
                        _ => Value::Bytes(interesting_string(rng)),
                    }
                }
            };
        }
    }
}

fn random_field(rng: &mut Rng) -> Field {
    let number = if rng.one_in(4) {
        *rng.pick(&[1000, 19_000, 536_870_911])
    } else {
        rng.below(16) as u64 + 1
    };
    let value = match rng.below(4) {
        0 => Value::Varint(*rng.pick(&INTERESTING_INTS) as u64),
        1 => Value::Bytes(interesting_string(rng)),
        2 => Value::Fixed64(rng.next()),
        _ => Value::Fixed32(rng.next() as u32),
    };
    Field { number, value }
}

/// Byte-level damage: flips, truncation, insertion, splicing with another
/// seed.
fn corrupt(bytes: &mut Vec<u8>, rng: &mut Rng, seeds: &[Vec<u8>]) {
    match rng.below(5) {
        0 if !bytes.is_empty() => {
            let i = rng.below(bytes.len());
            bytes[i] ^= 1 << rng.below(8);
        }
        1 if !bytes.is_empty() => {
            let keep = rng.below(bytes.len());
            bytes.truncate(keep);
        }
        2 => {
            let at = rng.below(bytes.len() + 1);
            let junk: Vec<u8> = (0..rng.below(8) + 1).map(|_| rng.next() as u8).collect();
            bytes.splice(at..at, junk);
        }
        3 if !seeds.is_empty() => {
            let other = rng.pick(seeds);
            let cut = rng.below(bytes.len() + 1);
            let from = rng.below(other.len() + 1);
            bytes.truncate(cut);
            bytes.extend_from_slice(&other[from..]);
        }
        _ => bytes.push(0xff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_encode_round_trip() {
        let fields = vec![
            Field {
                number: 1,
                value: Value::Bytes(b"db.orders".to_vec()),
            },
            Field {
                number: 3,
                value: Value::Varint(u64::MAX),
            },
            Field {
                number: 4,
                value: Value::Fixed32(7),
            },
            Field {
                number: 5,
                value: Value::Fixed64(9),
            },
        ];
        assert_eq!(parse(&encode(&fields)).unwrap(), fields);
    }

    #[test]
    fn malformed_wire_data_does_not_parse() {
        assert!(parse(&[0x0a, 0x05, b'a']).is_none(), "length beyond the end");
        assert!(parse(&[0x00]).is_none(), "field number 0");
        assert!(parse(&[0x0b]).is_none(), "groups");
        assert!(parse(&[0x08, 0xff]).is_none(), "truncated varint");
    }

    #[test]
    fn any_nested_varint_can_be_set() {
        let inner = encode(&[
            Field {
                number: 1,
                value: Value::Varint(7),
            },
            Field {
                number: 2,
                value: Value::Varint(2),
            },
        ]);
        let mut outer = vec![
            Field {
                number: 2,
                value: Value::Varint(1),
            },
            Field {
                number: 4,
                value: Value::Bytes(inner),
            },
        ];
        assert_eq!(count_varints(&outer, 0), 3);
        assert!(set_varint(&mut outer, &mut 1, u64::MAX, 0));
        let Value::Bytes(inner) = &outer[1].value else { panic!() };
        assert_eq!(parse(inner).unwrap()[0].value, Value::Varint(u64::MAX));
    }

    #[test]
    fn mutation_is_deterministic_for_a_seed() {
        let seed = encode(&[Field {
            number: 1,
            value: Value::Bytes(b"x".to_vec()),
        }]);
        let run = |s| {
            let mut rng = Rng::new(s);
            (0..50).map(|_| mutate(&seed, &mut rng, &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
