//! SARIF 2.1.0 for `audit --format sarif`, so CI systems (GitHub code scanning and others) show
//! the findings on the compose file's lines.

use crate::audit::Report;
use crate::findings::{FindingId, Severity};
use serde_json::{json, Value};

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

pub fn sarif(report: &Report) -> Value {
    let rules: Vec<Value> = FindingId::audit_rules()
        .map(|r| {
            json!({
                "id": r.as_str(),
                "name": r.as_str(),
                "shortDescription": {"text": r.summary()},
                "fullDescription": {"text": match r.fix() {
                    Some(fix) => format!("{}. Fix: {fix}.", r.summary()),
                    None => format!("{}.", r.summary()),
                }},
                "defaultConfiguration": {"level": level(r.severity())},
                "helpUri": "https://github.com/n8ncap/n8ncap#audit",
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|l| {
            let f = &l.finding;
            let mut text = f.title.clone();
            if let Some(w) = &f.why {
                text.push_str(". ");
                text.push_str(w);
            }
            if let Some(x) = &f.fix {
                text.push_str(" Fix: ");
                text.push_str(x);
            }
            let mut r = json!({
                "ruleId": f.id,
                "level": level(f.severity),
                "message": {"text": text},
            });
            // A finding whose id is not an audit rule (none today) gets no index rather than
            // rule 0's.
            if let Some(index) = f.id.audit_index() {
                r["ruleIndex"] = json!(index);
            }
            let uri = l
                .file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("container:{}", f.subject.clone().unwrap_or_default()));
            let mut phys = json!({"artifactLocation": {"uri": uri}});
            if let Some(line) = l.line {
                phys["region"] = json!({"startLine": line.max(1)});
            }
            r["locations"] = json!([{
                "physicalLocation": phys,
                "logicalLocations": [{"name": f.subject.clone().unwrap_or_default(), "kind": "resource"}],
            }]);
            r
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "n8ncap",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/n8ncap/n8ncap",
                "rules": rules,
            }},
            "results": results,
        }],
    })
}
