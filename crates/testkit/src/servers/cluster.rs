//! A real ClickHouse cluster for the integration tests: a ZooKeeper from Debian (package
//! `zookeeper`, run standalone as a child process) and shards × replicas of Debian's
//! `clickhouse-server`, each node on its own ports of 127.0.0.1 (18.16's distributed DDL worker
//! recognises itself in the cluster only by an address of a network interface, and 127.0.0.2 is
//! not one without configuring `lo`). Every node
//! has the same `remote_servers` entry ([`CLUSTER`]), the `{shard}`/`{replica}` macros and the
//! distributed DDL queue in ZooKeeper, so `ON CLUSTER` statements, `Replicated*` tables and
//! `Distributed` tables behave as in production. State lives in the test's temp dir.
//!
//! `scripts/services.sh install` installs ZooKeeper; without it (or Java) [`ClickHouseCluster::start_in`]
//! returns an error and the test prints a loud SKIPPED.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::clickhouse::ClickHouse;
use super::process::{free_port, stop_child, wait_for_start};

/// The cluster's name in every node's `remote_servers`.
pub const CLUSTER: &str = "sqlgrade_test";

const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// A standalone ZooKeeper server.
pub struct ZooKeeper {
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl ZooKeeper {
    /// Start one under `root/zookeeper` on a free loopback port.
    pub fn start_in(root: &Path) -> Result<ZooKeeper, String> {
        if !Path::new(ZOOKEEPER_JAR).is_file() {
            return Err(format!(
                "{ZOOKEEPER_JAR} missing: ZooKeeper not installed (run scripts/services.sh install)"
            ));
        }
        let dir = root.join("zookeeper");
        std::fs::create_dir_all(dir.join("data")).map_err(|e| e.to_string())?;
        let port = free_port();
        std::fs::write(
            dir.join("zoo.cfg"),
            format!(
                "tickTime=500\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nmaxSessionTimeout=60000\n",
                dir.join("data").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("zookeeper.log")).map_err(|e| e.to_string())?;
        let child = Command::new("java")
            .args(["-Xmx256m", "-cp"])
            .arg(format!("{}:{ZOOKEEPER_JAR}", dir.display()))
            .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start ZooKeeper (java): {e}"))?;
        let mut zk = ZooKeeper {
            dir,
            port,
            child: Some(child),
        };
        // `ruok` answers as soon as the process listens; `srvr` says whether it serves sessions
        // yet. A ClickHouse 18.16 node whose first session handshake fails crashes its DDL
        // worker (a NULL session), so the nodes start only once ZooKeeper really serves.
        let log = zk.dir.join("zookeeper.log");
        let child = zk.child.as_mut().expect("just spawned");
        wait_for_start(
            &format!("ZooKeeper (port {port})"),
            child,
            Duration::from_secs(30),
            &[log],
            || four_letter(port, "srvr").contains("Mode: standalone"),
        )?;
        Ok(zk)
    }
}

fn four_letter(port: u16, word: &str) -> String {
    use std::io::{Read as _, Write as _};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    let _ = s.write_all(word.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        stop_child(&mut self.child, "KILL", Duration::from_secs(5));
    }
}

/// One node of the cluster.
pub struct Node {
    /// 1-based shard number (the `{shard}` macro).
    pub shard: u32,
    /// 1-based replica number (the `{replica}` macro is `r<replica>`).
    pub replica: u32,
    pub server: ClickHouse,
}

/// ZooKeeper and `shards × replicas` ClickHouse nodes.
pub struct ClickHouseCluster {
    pub nodes: Vec<Node>,
    /// Declared after the nodes so that it stops after them.
    pub zookeeper: ZooKeeper,
}

impl ClickHouseCluster {
    /// Start ZooKeeper and the nodes under `root`; every shard has
    /// `internal_replication` (a write goes to one replica, replication copies it).
    pub fn start_in(root: &Path, shards: u32, replicas: u32) -> Result<ClickHouseCluster, String> {
        let zookeeper = ZooKeeper::start_in(root)?;
        let mut layout = Vec::new();
        for shard in 1..=shards {
            for replica in 1..=replicas {
                let host = "127.0.0.1".to_string();
                layout.push((shard, replica, host, free_port(), free_port(), free_port()));
            }
        }
        let mut remote = format!("<remote_servers><{CLUSTER}>");
        for shard in 1..=shards {
            remote.push_str("<shard><internal_replication>true</internal_replication>");
            for (_, _, host, _, tcp, _) in layout.iter().filter(|l| l.0 == shard) {
                remote.push_str(&format!(
                    "<replica><host>{host}</host><port>{tcp}</port></replica>"
                ));
            }
            remote.push_str("</shard>");
        }
        remote.push_str(&format!("</{CLUSTER}></remote_servers>"));
        let mut nodes = Vec::new();
        for (shard, replica, host, http, tcp, interserver) in &layout {
            let extra = format!(
                "<interserver_http_port>{interserver}</interserver_http_port>\
                 <interserver_http_host>{host}</interserver_http_host>\
                 <zookeeper><node><host>127.0.0.1</host><port>{zk}</port></node>\
                 <session_timeout_ms>30000</session_timeout_ms></zookeeper>\
                 <macros><shard>{shard}</shard><replica>r{replica}</replica><cluster>{CLUSTER}</cluster></macros>\
                 <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>\
                 {remote}",
                zk = zookeeper.port,
            );
            let server = ClickHouse::start_node(
                root,
                &format!("clickhouse-s{shard}r{replica}"),
                host,
                (*http, *tcp),
                &extra,
            )?;
            nodes.push(Node {
                shard: *shard,
                replica: *replica,
                server,
            });
        }
        Ok(ClickHouseCluster { nodes, zookeeper })
    }

    /// The node of `shard`, `replica` (1-based).
    pub fn node(&self, shard: u32, replica: u32) -> &ClickHouse {
        &self.node_entry(shard, replica).server
    }

    /// The node of `shard`, `replica` (1-based), to stop or restart it.
    pub fn node_mut(&mut self, shard: u32, replica: u32) -> &mut ClickHouse {
        let i = self
            .nodes
            .iter()
            .position(|n| n.shard == shard && n.replica == replica)
            .expect("node exists");
        &mut self.nodes[i].server
    }

    fn node_entry(&self, shard: u32, replica: u32) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.shard == shard && n.replica == replica)
            .expect("node exists")
    }
}
