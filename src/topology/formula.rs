//! A KEDA `scalingModifiers.formula` read as arithmetic over the triggers' names (KEDA evaluates
//! it with expr-lang; the part of it an autoscaler on lists uses: numbers, names, `+ - * /`
//! and parentheses). What else it holds (a function, a comparison, a ternary) is not read:
//! the formula is then not replayed, and said so.

/// A formula parsed: evaluated for any values of its names.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Number(f64),
    Name(String),
    Neg(Box<Expr>),
    Op(char, Box<Expr>, Box<Expr>),
}

/// Why a formula was not read, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Unread(pub String);

/// Deepest nesting read (a formula is a line; this bounds the recursion on hostile input).
const MAX_DEPTH: usize = 64;

impl Expr {
    /// The formula's value with each name's value from `value` (None: a name it does not know,
    /// or a division by zero).
    pub fn eval(&self, value: &dyn Fn(&str) -> Option<f64>) -> Option<f64> {
        Some(match self {
            Expr::Number(n) => *n,
            Expr::Name(n) => value(n)?,
            Expr::Neg(e) => -e.eval(value)?,
            Expr::Op(op, a, b) => {
                let (a, b) = (a.eval(value)?, b.eval(value)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ if b == 0.0 => return None,
                    _ => a / b,
                }
            }
        })
    }
}

/// Parses `text`; Err says what could not be read.
pub fn parse(text: &str) -> Result<Expr, Unread> {
    let tokens = tokens(text)?;
    let mut p = Parser { tokens, at: 0 };
    let e = p.sum(0)?;
    match p.tokens.get(p.at) {
        None => Ok(e),
        Some(t) => Err(Unread(format!("{t:?} where the formula should end"))),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Op(char),
}

fn tokens(text: &str) -> Result<Vec<Token>, Unread> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '+' | '-' | '*' | '/' | '(' | ')' => out.push(Token::Op(c)),
            c if c.is_ascii_digit() || c == '.' => {
                let mut end = i + c.len_utf8();
                while let Some((j, d)) = chars.peek().copied() {
                    if d.is_ascii_digit() || d == '.' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let n: f64 = text[i..end]
                    .parse()
                    .map_err(|_| Unread(format!("{:?} is not a number", &text[i..end])))?;
                out.push(Token::Number(n));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut end = i + c.len_utf8();
                while let Some((j, d)) = chars.peek().copied() {
                    if d.is_alphanumeric() || d == '_' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Name(text[i..end].to_string()));
            }
            c => return Err(Unread(format!("{c:?} is not arithmetic n8ncap replays"))),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next_op(&self, ops: &[char]) -> Option<char> {
        match self.tokens.get(self.at) {
            Some(Token::Op(o)) if ops.contains(o) => Some(*o),
            _ => None,
        }
    }

    fn sum(&mut self, depth: usize) -> Result<Expr, Unread> {
        let mut e = self.product(depth)?;
        while let Some(op) = self.next_op(&['+', '-']) {
            self.at += 1;
            e = Expr::Op(op, Box::new(e), Box::new(self.product(depth)?));
        }
        Ok(e)
    }

    fn product(&mut self, depth: usize) -> Result<Expr, Unread> {
        let mut e = self.unary(depth)?;
        while let Some(op) = self.next_op(&['*', '/']) {
            self.at += 1;
            e = Expr::Op(op, Box::new(e), Box::new(self.unary(depth)?));
        }
        Ok(e)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, Unread> {
        if depth > MAX_DEPTH {
            return Err(Unread(format!("nested more than {MAX_DEPTH} deep")));
        }
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        match t {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            // A name a function call follows is not arithmetic.
            Some(Token::Name(_)) if self.next_op(&['(']).is_some() => Err(Unread(
                "a function call is not arithmetic n8ncap replays".into(),
            )),
            Some(Token::Name(n)) => Ok(Expr::Name(n)),
            Some(Token::Op('-')) => Ok(Expr::Neg(Box::new(self.unary(depth + 1)?))),
            Some(Token::Op('+')) => self.unary(depth + 1),
            Some(Token::Op('(')) => {
                let e = self.sum(depth + 1)?;
                if self.next_op(&[')']).is_none() {
                    return Err(Unread("a '(' is not closed".into()));
                }
                self.at += 1;
                Ok(e)
            }
            Some(t) => Err(Unread(format!("{t:?} where a number or a name should be"))),
            None => Err(Unread("it ends where a number or a name should be".into())),
        }
    }
}

/// How the formula combines the lists, when it is a sum of them with weights: the weight of
/// each name and the constant, read by evaluating it at a few points and checked at one more
/// (None: it is not linear in them, or names one it does not know).
pub fn weights(e: &Expr, names: &[String]) -> Option<(Vec<f64>, f64)> {
    let at = |values: &dyn Fn(usize) -> f64| {
        e.eval(&|n: &str| names.iter().position(|m| m == n).map(values))
    };
    let constant = at(&|_| 0.0)?;
    let mut w = Vec::new();
    for i in 0..names.len() {
        w.push(at(&|j| if j == i { 1.0 } else { 0.0 })? - constant);
    }
    // Linear: at (3, 7, 11, …) the weights predict the value.
    let probe = |j: usize| 3.0 + 4.0 * j as f64;
    let predicted = constant
        + w.iter()
            .enumerate()
            .map(|(j, wj)| wj * probe(j))
            .sum::<f64>();
    let got = at(&probe)?;
    ((got - predicted).abs() <= 1e-9 * got.abs().max(1.0)).then_some((w, constant))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_weighted_sum_is_read_with_its_weights() {
        let n = names(&["waiting", "active"]);
        let w = |f: &str| weights(&parse(f).unwrap(), &n);
        assert_eq!(w("waiting + active"), Some((vec![1.0, 1.0], 0.0)));
        assert_eq!(w("waiting * 1000 + active"), Some((vec![1000.0, 1.0], 0.0)));
        assert_eq!(w("(waiting + active) / 2 + 1"), Some((vec![0.5, 0.5], 1.0)));
        assert_eq!(w("-waiting - -active"), Some((vec![-1.0, 1.0], 0.0)));
        assert_eq!(w("waiting * active"), None);
        assert_eq!(w("waiting + other"), None);
        assert_eq!(w("waiting / (active - active)"), None);
    }

    #[test]
    fn what_is_not_arithmetic_is_not_read() {
        for f in [
            "max(waiting, active)",
            "waiting > 5 ? 1 : 0",
            "waiting +",
            "(waiting",
            "1.2.3",
            "waiting active",
            &"(".repeat(10_000),
        ] {
            assert!(parse(f).is_err(), "{f}");
        }
    }
}
