//! Every replica's readiness through a run, as the replicas push it.

use std::time::Duration;

use crate::availability::ReadinessSample;
use crate::record::now_us;

/// The replicas' readiness interval, and how long a ping may take before
/// it counts as failed (the server's floor): together, how long a replica
/// may say SERVING after its database stopped answering.
pub(crate) const READINESS_INTERVAL: Duration = Duration::from_millis(250);
pub(crate) const READINESS_PING_LIMIT: Duration = Duration::from_millis(500);
/// How soon a broken readiness stream is opened again.
pub(crate) const READINESS_REWATCH_AFTER: Duration = Duration::from_millis(100);

/// Every replica's readiness through the run, as the replicas push it:
/// one `Health/Watch` stream each (every change of status, however brief,
/// none missed between polls), reopened at once when it breaks (a killed
/// or restarting replica), which is recorded as "no answer".
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadinessLog(std::sync::Arc<std::sync::Mutex<Vec<ReadinessSample>>>);

impl ReadinessLog {
    pub(crate) fn watch(&self, urls: Vec<String>) -> Vec<tokio::task::JoinHandle<()>> {
        urls.into_iter()
            .enumerate()
            .map(|(replica, url)| tokio::spawn(self.clone().watch_one(replica, url)))
            .collect()
    }

    pub(crate) async fn watch_one(self, replica: usize, url: String) {
        use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
        loop {
            let stream = async {
                let channel = tonic::transport::Endpoint::from_shared(url.clone())?
                    .connect_timeout(Duration::from_secs(1))
                    .connect()
                    .await?;
                let request = HealthCheckRequest {
                    service: "readiness".into(),
                };
                anyhow::Ok(HealthClient::new(channel).watch(request).await?.into_inner())
            };
            if let Ok(mut stream) = stream.await {
                while let Ok(Some(answer)) = stream.message().await {
                    self.push(replica, Some(answer.status() == ServingStatus::Serving));
                }
            }
            self.push(replica, None);
            tokio::time::sleep(READINESS_REWATCH_AFTER).await;
        }
    }

    pub(crate) fn push(&self, replica: usize, serving: Option<bool>) {
        let sample = ReadinessSample {
            t: now_us(),
            replica,
            serving,
        };
        self.0.lock().expect("not poisoned").push(sample);
    }

    pub(crate) fn samples(&self) -> Vec<ReadinessSample> {
        self.0.lock().expect("not poisoned").clone()
    }
}
