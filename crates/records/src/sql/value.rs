//! Values between JSON (stored records, query results, cursors) and GlueSQL, and the sort key
//! that pagination orders rows by.

use std::cmp::Ordering;

use gluesql_core::ast::DataType;
use gluesql_core::data::Value as Sql;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// A stored JSON value as a SQL value: objects become maps, arrays lists, integers `I64`.
pub fn from_json(v: &Json) -> Sql {
    match v {
        Json::Null => Sql::Null,
        Json::Bool(b) => Sql::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Sql::I64(i),
            None => Sql::F64(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Sql::Str(s.clone()),
        Json::Array(items) => Sql::List(items.iter().map(from_json).collect()),
        Json::Object(map) => Sql::Map(map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect()),
    }
}

/// A JSON object as a SQL map.
pub fn from_map(map: &Map<String, Json>) -> Sql {
    Sql::Map(map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
}

pub fn text(s: &str) -> Sql {
    Sql::Str(s.to_string())
}

pub fn opt_text(s: Option<&str>) -> Sql {
    s.map_or(Sql::Null, text)
}

/// The column type a JSON Schema property declares (for `GLUE_TABLE_COLUMNS` and the
/// `entity_types` table); values keep their own JSON type whatever it says.
pub fn data_type_of_schema(schema: &Json) -> DataType {
    let declared = match schema.get("type") {
        Some(Json::String(t)) => Some(t.as_str()),
        Some(Json::Array(types)) => types.iter().filter_map(Json::as_str).find(|t| *t != "null"),
        _ => None,
    };
    match declared {
        Some("integer") => DataType::Int,
        Some("number") => DataType::Float,
        Some("boolean") => DataType::Boolean,
        Some("array") => DataType::List,
        Some("object") => DataType::Map,
        _ => DataType::Text,
    }
}

/// The column type of a computed value (CTE results).
pub fn data_type_of_value(v: &Sql) -> Option<DataType> {
    Some(match v {
        Sql::Null => return None,
        Sql::Bool(_) => DataType::Boolean,
        Sql::I8(_) | Sql::I16(_) | Sql::I32(_) | Sql::I64(_) | Sql::U8(_) | Sql::U16(_) => {
            DataType::Int
        }
        Sql::U32(_) | Sql::U64(_) | Sql::I128(_) | Sql::U128(_) => DataType::Int128,
        Sql::F32(_) | Sql::F64(_) => DataType::Float,
        Sql::Decimal(_) => DataType::Decimal,
        Sql::Map(_) => DataType::Map,
        Sql::List(_) => DataType::List,
        Sql::Bytea(_) => DataType::Bytea,
        Sql::Date(_) => DataType::Date,
        Sql::Timestamp(_) => DataType::Timestamp,
        Sql::Time(_) => DataType::Time,
        Sql::Interval(_) => DataType::Interval,
        Sql::Uuid(_) => DataType::Uuid,
        Sql::Inet(_) => DataType::Inet,
        Sql::Point(_) => DataType::Point,
        Sql::Str(_) => DataType::Text,
    })
}

/// A result value as JSON: numbers stay numbers (integers beyond 64 bits and non-finite floats
/// become text), maps and lists become objects and arrays, everything else its SQL text.
pub fn to_json(v: &Sql) -> Json {
    match v {
        Sql::Null => Json::Null,
        Sql::Bool(b) => Json::Bool(*b),
        Sql::I8(n) => Json::from(*n),
        Sql::I16(n) => Json::from(*n),
        Sql::I32(n) => Json::from(*n),
        Sql::I64(n) => Json::from(*n),
        Sql::U8(n) => Json::from(*n),
        Sql::U16(n) => Json::from(*n),
        Sql::U32(n) => Json::from(*n),
        Sql::U64(n) => Json::from(*n),
        Sql::I128(n) => i64::try_from(*n).map_or_else(|_| Json::String(n.to_string()), Json::from),
        Sql::U128(n) => u64::try_from(*n).map_or_else(|_| Json::String(n.to_string()), Json::from),
        Sql::F32(f) => float(f64::from(*f)),
        Sql::F64(f) => float(*f),
        Sql::Decimal(d) => d
            .to_string()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map_or_else(|| Json::String(d.to_string()), float),
        Sql::Str(s) => Json::String(s.clone()),
        Sql::Map(map) => Json::Object(map.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
        Sql::List(items) => Json::Array(items.iter().map(to_json).collect()),
        other => Json::String(String::from(other)),
    }
}

fn float(f: f64) -> Json {
    serde_json::Number::from_f64(f).map_or_else(|| Json::String(f.to_string()), Json::Number)
}

/// One value as pagination compares it. Numbers of every type compare as numbers; across
/// kinds the order is booleans, numbers, text, then the rest by their JSON text. `NULL` is
/// placed by the sort (last ascending, first descending, unless the query says otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SortKey {
    #[serde(rename = "z")]
    Null,
    #[serde(rename = "b")]
    Bool(bool),
    #[serde(rename = "n")]
    Num(f64),
    #[serde(rename = "s")]
    Text(String),
    #[serde(rename = "o")]
    Other(String),
}

impl SortKey {
    pub fn of(v: &Sql) -> Self {
        match v {
            Sql::Null => Self::Null,
            Sql::Bool(b) => Self::Bool(*b),
            Sql::Str(s) => Self::Text(s.clone()),
            Sql::Map(_) | Sql::List(_) => Self::Other(to_json(v).to_string()),
            _ => match to_json(v) {
                Json::Number(n) => Self::Num(n.as_f64().unwrap_or(f64::NAN)),
                Json::String(s) => Self::Other(s),
                other => Self::Other(other.to_string()),
            },
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Self::Null => 0,
            Self::Bool(_) => 1,
            Self::Num(_) => 2,
            Self::Text(_) => 3,
            Self::Other(_) => 4,
        }
    }

    /// Compares two keys; `nulls_first` says where `NULL` goes in ascending order.
    pub fn compare(&self, other: &Self, nulls_first: bool) -> Ordering {
        match (self, other) {
            (Self::Null, Self::Null) => Ordering::Equal,
            (Self::Null, _) => null_order(nulls_first),
            (_, Self::Null) => null_order(nulls_first).reverse(),
            (Self::Bool(a), Self::Bool(b)) => a.cmp(b),
            (Self::Num(a), Self::Num(b)) => a.total_cmp(b),
            (Self::Text(a), Self::Text(b)) | (Self::Other(a), Self::Other(b)) => a.cmp(b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

fn null_order(nulls_first: bool) -> Ordering {
    if nulls_first {
        Ordering::Less
    } else {
        Ordering::Greater
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_sql_values() {
        let v = json!({"a": [1, 2.5, "x", null, true], "b": {"c": -3}});
        assert_eq!(to_json(&from_json(&v)), v);
        assert_eq!(to_json(&Sql::F64(f64::NAN)), json!("NaN"));
        assert_eq!(
            to_json(&Sql::I128(1 << 70)),
            json!((1i128 << 70).to_string())
        );
    }

    #[test]
    fn sort_keys_order_numbers_across_types_and_place_nulls() {
        let one = SortKey::of(&Sql::I64(1));
        let one_half = SortKey::of(&Sql::F64(1.5));
        let two = SortKey::of(&Sql::U8(2));
        assert_eq!(one.compare(&one_half, false), Ordering::Less);
        assert_eq!(two.compare(&one_half, false), Ordering::Greater);
        let null = SortKey::of(&Sql::Null);
        assert_eq!(null.compare(&one, false), Ordering::Greater);
        assert_eq!(null.compare(&one, true), Ordering::Less);
        assert_eq!(
            SortKey::of(&Sql::Str("a".into())).compare(&one, false),
            Ordering::Greater
        );
    }
}
