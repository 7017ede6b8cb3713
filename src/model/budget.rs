//! The Postgres connection budget: every n8n process keeps a pool of `DB_POSTGRESDB_POOL_SIZE`
//! connections (n8n's default 2), so a deployment needs Σ pool × processes, each group counted at
//! its most (an HPA's or KEDA's maximum replicas). Postgres allows `max_connections` less
//! `superuser_reserved_connections` (default 3) to every other user; past that it refuses with
//! SQLSTATE 53300. A PgBouncer in transaction mode in front takes n8n's connections up to its
//! `max_client_conn` and holds only its own pool (`default_pool_size`) open to Postgres.

/// Postgres' `superuser_reserved_connections` when not set.
pub const RESERVED_DEFAULT: u32 = 3;

/// Postgres' `max_connections` when not set.
pub const MAX_CONNECTIONS_DEFAULT: u32 = 100;

/// A group of n8n processes with one pool size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Processes {
    /// At their most: the replicas, or the autoscaler's maximum.
    pub count: u32,
    pub pool: u32,
}

/// Postgres' side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Postgres {
    pub max_connections: u32,
    /// `superuser_reserved_connections` (None: 3, Postgres' default).
    pub reserved: Option<u32>,
}

impl Postgres {
    /// Connections ordinary users may open.
    pub fn available(&self) -> u32 {
        self.max_connections
            .saturating_sub(self.reserved.unwrap_or(RESERVED_DEFAULT))
    }
}

/// A PgBouncer between n8n and Postgres.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PgBouncer {
    /// `max_client_conn`: the clients it accepts.
    pub max_client_conn: u32,
    /// The server connections it opens per database and user: `default_pool_size` and
    /// `reserve_pool_size`.
    pub pool_size: u32,
    /// `pool_mode = session` (PgBouncer's default): a client keeps its server connection for
    /// as long as it is connected, and n8n's pools stay connected — so only `pool_size` of
    /// n8n's connections get one; the rest wait in PgBouncer until `query_wait_timeout`.
    #[serde(default)]
    pub session: bool,
}

/// PgBouncer's defaults (pgbouncer.ini): `max_client_conn`, `default_pool_size`; its
/// `reserve_pool_size` is 0 and its `pool_mode` session.
pub const PGBOUNCER_MAX_CLIENT_CONN: u32 = 100;
pub const PGBOUNCER_DEFAULT_POOL_SIZE: u32 = 20;

/// What the budget comes to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Connections n8n's pools open at most.
    pub needed: u32,
    /// What takes them: Postgres' available connections, or PgBouncer's `max_client_conn`.
    pub allowed: u32,
    /// Server connections held open on Postgres (n8n's pools, or PgBouncer's pool).
    pub on_postgres: u32,
    /// Postgres' available connections, when known.
    pub postgres_available: Option<u32>,
}

impl Budget {
    /// Whether every pool can fill without a refusal.
    pub fn fits(&self) -> bool {
        self.needed <= self.allowed
            && self
                .postgres_available
                .is_none_or(|a| self.on_postgres <= a)
    }
}

/// The budget of `groups` against Postgres (when known) through PgBouncer (when there is one).
pub fn connections(
    groups: &[Processes],
    pg: Option<Postgres>,
    bouncer: Option<PgBouncer>,
) -> Budget {
    let needed = groups
        .iter()
        .map(|g| g.pool.saturating_mul(g.count))
        .fold(0u32, u32::saturating_add);
    let postgres_available = pg.map(|p| p.available());
    match bouncer {
        Some(b) => Budget {
            needed,
            allowed: if b.session {
                b.max_client_conn.min(b.pool_size)
            } else {
                b.max_client_conn
            },
            on_postgres: b.pool_size,
            postgres_available,
        },
        None => Budget {
            needed,
            allowed: postgres_available.unwrap_or(u32::MAX),
            on_postgres: needed,
            postgres_available,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: Processes = Processes { count: 1, pool: 2 };

    #[test]
    fn autoscaler_maxima_count_and_reserved_connections_are_not_ours() {
        // 10 workers at KEDA's maximum with pools of 10, and main: 102 needed.
        let workers = Processes {
            count: 10,
            pool: 10,
        };
        let pg = Postgres {
            max_connections: 100,
            reserved: None,
        };
        let b = connections(&[MAIN, workers], Some(pg), None);
        assert_eq!((b.needed, b.allowed, b.on_postgres), (102, 97, 102));
        assert!(!b.fits());
        // At the HPA's minimum of 5 they fit: 52 ≤ 97.
        let b = connections(
            &[
                MAIN,
                Processes {
                    count: 5,
                    ..workers
                },
            ],
            Some(pg),
            None,
        );
        assert!(b.fits());
        // Exactly at the limit fits; one more does not.
        let pg = Postgres {
            max_connections: 55,
            reserved: Some(3),
        };
        assert!(connections(
            &[
                MAIN,
                Processes {
                    count: 5,
                    ..workers
                }
            ],
            Some(pg),
            None
        )
        .fits());
        let pg = Postgres {
            max_connections: 54,
            ..pg
        };
        assert!(!connections(
            &[
                MAIN,
                Processes {
                    count: 5,
                    ..workers
                }
            ],
            Some(pg),
            None
        )
        .fits());
    }

    #[test]
    fn pgbouncer_takes_the_clients_and_holds_its_own_pool() {
        let workers = Processes {
            count: 10,
            pool: 10,
        };
        let pg = Postgres {
            max_connections: 100,
            reserved: Some(3),
        };
        let b = connections(
            &[MAIN, workers],
            Some(pg),
            Some(PgBouncer {
                max_client_conn: 200,
                pool_size: 20,
                session: false,
            }),
        );
        assert_eq!((b.needed, b.allowed, b.on_postgres), (102, 200, 20));
        assert!(b.fits());
        // Its client limit binds like max_connections did.
        let b = connections(
            &[MAIN, workers],
            Some(pg),
            Some(PgBouncer {
                max_client_conn: 100,
                pool_size: 20,
                session: false,
            }),
        );
        assert!(!b.fits());
        // A bouncer pool larger than Postgres allows is refused on the server side.
        let b = connections(
            &[MAIN],
            Some(pg),
            Some(PgBouncer {
                max_client_conn: 1000,
                pool_size: 98,
                session: false,
            }),
        );
        assert!(!b.fits());
        // In session mode n8n's pools, always connected, keep their server connections: only
        // the bouncer's pool of them is served.
        let b = connections(
            &[MAIN, workers],
            Some(pg),
            Some(PgBouncer {
                max_client_conn: 200,
                pool_size: 20,
                session: true,
            }),
        );
        assert_eq!((b.needed, b.allowed, b.on_postgres), (102, 20, 20));
        assert!(!b.fits());
    }

    #[test]
    fn without_postgres_known_only_the_need_is_said() {
        let b = connections(&[MAIN, Processes { count: 3, pool: 2 }], None, None);
        assert_eq!(b.needed, 8);
        assert!(b.fits());
        assert_eq!(b.postgres_available, None);
    }
}
