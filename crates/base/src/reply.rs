//! A JSON reply: a value as a tree, or one serialized already and kept (a repeated search's
//! answer, from its cache). Whoever writes the reply out takes its text, and its text quoted as
//! a JSON string (MCP's text content), from [`Reply::parts`]: a kept text was serialized and
//! quoted once, whatever number of times it is sent.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::rc::Rc;

use serde_json::Value;

/// A value to answer with.
#[derive(Debug, Clone)]
pub enum Reply {
    Tree(Value),
    Text(Rc<Text>),
}

/// A value serialized, and the same quoted as a JSON string once it was asked for.
#[derive(Debug)]
pub struct Text {
    json: String,
    quoted: OnceCell<String>,
}

impl Text {
    /// `value` serialized.
    pub fn of(value: &Value) -> Rc<Self> {
        Rc::new(Self {
            json: value.to_string(),
            quoted: OnceCell::new(),
        })
    }

    /// JSON text serialized before (an SDK method's answer), kept as it is.
    pub fn raw(json: Box<serde_json::value::RawValue>) -> Rc<Self> {
        Rc::new(Self {
            json: Box::<str>::from(json).into(),
            quoted: OnceCell::new(),
        })
    }

    pub fn json(&self) -> &str {
        &self.json
    }

    /// The text as a JSON string.
    pub fn quoted(&self) -> &str {
        self.quoted.get_or_init(|| quote(&self.json))
    }
}

/// `s` as a JSON string.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

impl Reply {
    /// The reply as a tree (a kept text is parsed again).
    pub fn into_value(self) -> serde_json::Result<Value> {
        match self {
            Self::Tree(v) => Ok(v),
            Self::Text(t) => serde_json::from_str(&t.json),
        }
    }

    /// The reply serialized.
    pub fn json(&self) -> Cow<'_, str> {
        match self {
            Self::Tree(v) => Cow::Owned(v.to_string()),
            Self::Text(t) => Cow::Borrowed(t.json()),
        }
    }

    /// The reply serialized, and the same quoted as a JSON string: a tree is serialized once
    /// for both, a kept text was serialized and quoted before.
    pub fn parts(&self) -> (Cow<'_, str>, Cow<'_, str>) {
        match self {
            Self::Tree(v) => {
                let json = v.to_string();
                let quoted = quote(&json);
                (Cow::Owned(json), Cow::Owned(quoted))
            }
            Self::Text(t) => (Cow::Borrowed(t.json()), Cow::Borrowed(t.quoted())),
        }
    }
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Self::Tree(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kept_text_reads_as_the_tree_it_was_made_from() {
        let value = json!({ "results": [{ "content": "a \"quoted\"\nline, é", "score": 0.5 }] });
        let tree = Reply::Tree(value.clone());
        let text = Reply::Text(Text::of(&value));
        assert_eq!(tree.parts(), text.parts());
        let (json, quoted) = text.parts();
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), value);
        assert_eq!(serde_json::from_str::<String>(&quoted).unwrap(), json);
        assert_eq!(text.into_value().unwrap(), value);
    }
}
