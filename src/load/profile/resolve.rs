//! A profile resolved into what a run does: its stages (durations parsed, every stage checked
//! against the model, a ramp cut into windows), its request timeout, and its scenarios (the
//! profile's request under each, weights as shares).

use super::*;

impl Profile {
    /// Parses durations and checks that every stage fits the model.
    pub fn resolve_stages(&self) -> anyhow::Result<Vec<Stage>> {
        let dur = |field: &str, v: &str| {
            parse_duration(v).map_err(|e| BadInput(format!("profile {}: {field}: {e}", self.name)))
        };
        let default_duration = dur("stage_duration", &self.stage_duration)?;
        let default_warmup = dur("warmup", &self.warmup)?;
        if self.stages.is_empty() {
            return bad_input(format!("profile {} has no stages", self.name));
        }
        if self.stages.iter().any(|s| s.target.is_some()) {
            return self.resolve_ramp(default_warmup);
        }
        let mut out = Vec::new();
        for (i, s) in self.stages.iter().enumerate() {
            let duration = match &s.duration {
                Some(d) => dur(&format!("stages[{i}].duration"), d)?,
                None => default_duration,
            };
            let warmup = match &s.warmup {
                Some(d) => dur(&format!("stages[{i}].warmup"), d)?,
                None => default_warmup,
            };
            if duration.is_zero() {
                return bad_input(format!(
                    "profile {}: stage {} has no duration",
                    self.name,
                    i + 1
                ));
            }
            self.check_stage(i, s)?;
            out.push(Stage {
                vus: if self.model == LoadModel::Closed {
                    s.vus
                } else {
                    None
                },
                rate: if self.model == LoadModel::Open {
                    s.rate
                } else {
                    None
                },
                ramp_to: s.ramp_to,
                max_vus: s.max_vus.or(if self.model == LoadModel::Open {
                    Some(1000)
                } else {
                    None
                }),
                duration,
                warmup: warmup.min(duration / 2),
                ramp: None,
            });
        }
        Ok(out)
    }

    /// A fixed stage's figures within what n8ncap sends, and the load its model needs (`vus`
    /// closed, `rate` open).
    fn check_stage(&self, i: usize, s: &StageSpec) -> anyhow::Result<()> {
        let max = crate::record::stage::MAX_IN_FLIGHT;
        let stage = format!("profile {}: stage {}", self.name, i + 1);
        if let Some(r) = s.ramp_to {
            if !(r.is_finite() && (0.0..=MAX_RATE).contains(&r)) {
                return bad_input(format!(
                    "{stage}: ramp_to must be an arrival rate from 0 to {MAX_RATE} per second"
                ));
            }
        }
        if let Some(m) = s.max_vus {
            if m == 0 || m > max {
                return bad_input(format!("{stage}: max_vus must be from 1 to {max}"));
            }
        }
        if s.vus.is_some_and(|v| v > max) {
            return bad_input(format!("{stage}: vus must be at most {max}"));
        }
        if s.rate
            .is_some_and(|r| !(r.is_finite() && r > 0.0 && r <= MAX_RATE))
        {
            return bad_input(format!(
                "{stage}: rate must be an arrival rate above 0 and at most {MAX_RATE} per second"
            ));
        }
        match self.model {
            LoadModel::Closed => match s.vus {
                Some(v) if v > 0 => {}
                _ => {
                    return bad_input(format!(
                        "profile {}: stage {} of a closed model needs `vus` of at least 1",
                        self.name,
                        i + 1
                    ))
                }
            },
            LoadModel::Open => match s.rate {
                Some(r) if r > 0.0 && r.is_finite() => {}
                _ => {
                    return bad_input(format!(
                        "profile {}: stage {} of an open model needs a `rate` (arrivals/s) above 0",
                        self.name,
                        i + 1
                    ))
                }
            },
        }
        Ok(())
    }

    /// k6's `ramping-vus`: a stage whose target differs from the one before becomes windows of
    /// `ramp_window` measured while the users move; a stage that keeps the target is a held
    /// step (a load level, with the profile's warm-up).
    fn resolve_ramp(&self, warmup: Duration) -> anyhow::Result<Vec<Stage>> {
        let at = format!("profile {}", self.name);
        if self.model != LoadModel::Closed {
            return bad_input(format!(
                "{at}: `target` stages ramp virtual users (closed model); for arrival rates use \
                 `rate` and `ramp_to`"
            ));
        }
        let window = parse_duration(&self.ramp_window)
            .map_err(|e| BadInput(format!("{at}: ramp_window: {e}")))?
            .max(Duration::from_millis(500));
        let max = crate::record::stage::MAX_IN_FLIGHT;
        let mut prev = self.start_vus;
        let mut out = Vec::new();
        for (i, s) in self.stages.iter().enumerate() {
            let here = format!("{at}: stage {}", i + 1);
            let (Some(target), None, None) = (s.target, s.vus, s.rate) else {
                return bad_input(format!(
                    "{here}: a ramping profile gives every stage a `target` and a `duration` (and no vus or rate)"
                ));
            };
            if target > max || prev > max {
                return bad_input(format!("{here}: target must be at most {max}"));
            }
            let duration = match &s.duration {
                Some(d) => {
                    parse_duration(d).map_err(|e| BadInput(format!("{here}: duration: {e}")))?
                }
                None => return bad_input(format!("{here}: a ramping stage needs a `duration`")),
            };
            if duration.is_zero() {
                return bad_input(format!("{here} has no duration"));
            }
            if target == prev {
                // A held step; a pause at 0 users measures nothing and is skipped.
                if target > 0 {
                    out.push(Stage {
                        vus: Some(target),
                        rate: None,
                        ramp_to: None,
                        max_vus: None,
                        duration,
                        warmup: warmup.min(duration / 2),
                        ramp: None,
                    });
                }
                continue;
            }
            let n = (duration.as_secs_f64() / window.as_secs_f64())
                .ceil()
                .max(1.0) as u32;
            let vus_at = |k: u32| prev as f64 + (target as f64 - prev as f64) * k as f64 / n as f64;
            for k in 0..n {
                let (from, to) = (vus_at(k).round() as u32, vus_at(k + 1).round() as u32);
                out.push(Stage {
                    vus: Some(((vus_at(k) + vus_at(k + 1)) / 2.0).round().max(1.0) as u32),
                    rate: None,
                    ramp_to: None,
                    max_vus: None,
                    duration: duration / n,
                    warmup: Duration::ZERO,
                    ramp: Some(crate::record::stage::Ramp { from, to }),
                });
            }
            prev = target;
        }
        if out.is_empty() {
            return bad_input(format!(
                "{at}: every stage holds 0 virtual users: nothing to run"
            ));
        }
        Ok(out)
    }

    pub fn timeout(&self) -> anyhow::Result<Duration> {
        let t = parse_duration(&self.request.timeout)
            .map_err(|e| BadInput(format!("profile {}: request.timeout: {e}", self.name)))?;
        if t < Duration::from_millis(1) {
            return bad_input(format!(
                "profile {}: request.timeout (--timeout) must be more than 0: a request needs time \
                 to be answered",
                self.name
            ));
        }
        Ok(t)
    }
}

/// The origin (`scheme://host:port`) of a URL, for joining a scenario's path to it.
pub(super) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    match url[after_scheme..].find(['/', '?', '#']) {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

impl Profile {
    /// The scenarios to run: the profile's own request as one scenario, or its `scenarios` with
    /// the profile's request applied under them and their weights turned into shares.
    pub fn scenarios(&self) -> anyhow::Result<Vec<Scenario>> {
        if self.scenarios.is_empty() {
            return Ok(vec![Scenario {
                name: "default".into(),
                share: 1.0,
                request: self.request.clone(),
                checks: self.checks.clone(),
                job_time_s: None,
                code_time_s: None,
            }]);
        }
        let at = format!("profile {}", self.name);
        if self.scenarios.len() > MAX_SCENARIOS {
            return bad_input(format!(
                "{at} has {} scenarios: at most {MAX_SCENARIOS}",
                self.scenarios.len()
            ));
        }
        if self.request.has_body() {
            return bad_input(format!(
                "{at}: request.body (or body_file, files) with scenarios: each scenario's workflow \
                 has its own body — move it into the scenarios"
            ));
        }
        let total: f64 = self.scenarios.iter().map(|s| s.weight).sum();
        let mut out: Vec<Scenario> = Vec::new();
        for (i, s) in self.scenarios.iter().enumerate() {
            out.push(self.scenario(i, s, total)?);
        }
        Ok(out)
    }

    fn scenario(&self, i: usize, s: &ScenarioSpec, total: f64) -> anyhow::Result<Scenario> {
        let at = format!("profile {}: scenarios[{i}]", self.name);
        let name = s.name.trim();
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return bad_input(format!("{at}.name must be 1 to 64 printable characters"));
        }
        if self.scenarios[..i].iter().any(|o| o.name.trim() == name) {
            return bad_input(format!("{at}: the name {name:?} is used twice"));
        }
        if !(s.weight.is_finite() && s.weight > 0.0 && s.weight <= 1e6) {
            return bad_input(format!(
                "{at}.weight must be a number above 0 (a share relative to the other scenarios)"
            ));
        }
        let r = &s.request;
        let url = if r.url.starts_with('/') {
            format!("{}{}", origin(&self.request.url), r.url)
        } else {
            r.url.clone()
        };
        let mut headers = self.request.headers.clone();
        headers.extend(r.headers.clone());
        let request = RequestSpec {
            method: r
                .method
                .clone()
                .unwrap_or_else(|| self.request.method.clone()),
            url,
            headers,
            body: r.body.clone(),
            timeout: r
                .timeout
                .clone()
                .unwrap_or_else(|| self.request.timeout.clone()),
            ca_cert: self.request.ca_cert.clone(),
            insecure: self.request.insecure,
            body_file: r.body_file.clone(),
            files: r.files.clone(),
            fields: r.fields.clone(),
        };
        let secs = |field: &str, v: &Option<String>| -> anyhow::Result<Option<f64>> {
            v.as_deref()
                .map(|t| {
                    crate::util::parse_duration(t)
                        .map(|d| d.as_secs_f64())
                        .map_err(|e| BadInput(format!("{at}.{field}: {e}")).into())
                })
                .transpose()
        };
        let job_time_s = secs("job_time", &s.job_time)?;
        let code_time_s = secs("code_time", &s.code_time)?;
        if let (Some(j), Some(c)) = (job_time_s, code_time_s) {
            if c > j {
                return bad_input(format!(
                    "{at}: code_time ({c} s) is longer than job_time ({j} s): the Code node runs \
                     inside the job"
                ));
            }
        }
        Ok(Scenario {
            name: name.to_string(),
            share: s.weight / total,
            request,
            checks: s.checks.clone().unwrap_or_else(|| self.checks.clone()),
            job_time_s,
            code_time_s,
        })
    }
}
