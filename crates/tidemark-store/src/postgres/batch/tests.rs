use super::*;
use std::sync::atomic::AtomicBool;

#[derive(Debug)]
struct Write {
    name: &'static str,
    key: char,
    gone: bool,
}

impl Job for Write {
    type Key = char;
    fn key(&self) -> Option<&char> {
        Some(&self.key)
    }
    fn abandoned(&self) -> bool {
        self.gone
    }
}

fn queue(jobs: &[(&'static str, bool)]) -> VecDeque<Write> {
    jobs.iter()
        .map(|&(name, gone)| Write {
            name,
            key: name.chars().next().unwrap(),
            gone,
        })
        .collect()
}

fn names(jobs: &[Write]) -> Vec<&'static str> {
    jobs.iter().map(|j| j.name).collect()
}

#[test]
fn a_batch_continues_past_a_duplicate_key() {
    let mut pending = queue(&[("A1", false), ("A2", false), ("B", false), ("C", false)]);
    let (first, _) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&first), ["A1", "B", "C"]);
    let (second, _) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&second), ["A2"]);
    assert!(pending.is_empty());
}

#[test]
fn one_busy_key_does_not_shrink_the_others_batches() {
    // One client's burst on key A among other keys: every batch carries
    // one A and every other key waiting, in queue order.
    let mut pending = queue(&[
        ("A1", false),
        ("A2", false),
        ("A3", false),
        ("B", false),
        ("A4", false),
        ("C", false),
        ("D", false),
    ]);
    let (first, _) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&first), ["A1", "B", "C", "D"]);
    assert_eq!(names(pending.make_contiguous()), ["A2", "A3", "A4"]);
    let (second, _) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&second), ["A2"]);
}

#[test]
fn a_key_in_flight_waits_for_its_batch() {
    // A's previous write is still in flight in another batch: every A
    // waits (their row would be locked), the others go.
    let mut pending = queue(&[("A1", false), ("B", false), ("A2", false), ("C", false)]);
    let (first, _) = take_batch(&mut pending, 64, &['A']);
    assert_eq!(names(&first), ["B", "C"]);
    assert_eq!(names(pending.make_contiguous()), ["A1", "A2"]);
    let (second, _) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&second), ["A1"]);
}

#[test]
fn callers_that_went_away_are_dropped_before_sending() {
    let mut pending = queue(&[("A", true), ("B", false), ("C", true), ("D", false)]);
    let (batch, dropped) = take_batch(&mut pending, 64, &[]);
    assert_eq!(names(&batch), ["B", "D"]);
    assert_eq!(dropped, 2);
}

#[tokio::test]
async fn one_key_cannot_fill_the_queue() {
    let release = Arc::new(Semaphore::new(0));
    let batcher = {
        let release = Arc::clone(&release);
        Batcher::new("write", 1, 1, 64, move |_batch: Vec<Write>| {
            let release = Arc::clone(&release);
            async move { release.acquire().await.unwrap().forget() }
        })
    };
    let job = |name: &'static str| Write {
        name,
        key: name.chars().next().unwrap(),
        gone: false,
    };
    // One burst on key A: its first goes out (and is held there), the
    // next waiting_per_key(64) wait, the rest are refused; B still gets
    // in.
    let names: Vec<&'static str> = (0..80).map(|i| &*format!("A{i}").leak()).collect();
    let mut accepted = 0;
    let mut refused = 0;
    for name in names {
        match batcher.submit(job(name)) {
            Ok(()) => accepted += 1,
            Err(StoreError::Overloaded(_)) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(waiting_per_key(64), 32);
    assert!(accepted <= 32 + 1, "{accepted} accepted");
    assert_eq!(accepted + refused, 80);
    batcher
        .submit(job("B"))
        .expect("another key is not refused for A's burst");
    release.add_permits(64);
}

#[test]
fn a_batch_stops_at_its_size_and_keeps_the_order() {
    let mut pending = queue(&[("A", false), ("B", false), ("C", false), ("B2", false), ("D", false)]);
    let (batch, _) = take_batch(&mut pending, 2, &[]);
    assert_eq!(names(&batch), ["A", "B"]);
    assert_eq!(names(pending.make_contiguous()), ["C", "B2", "D"]);
}

#[tokio::test]
async fn a_full_queue_refuses_and_every_batch_holds_a_slot_to_its_end() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(Semaphore::new(0));
    let batcher = {
        let (running, most, release) = (Arc::clone(&running), Arc::clone(&most), Arc::clone(&release));
        Batcher::new("write", 2, 1, 4, move |_batch: Vec<Write>| {
            let (running, most, release) = (Arc::clone(&running), Arc::clone(&most), Arc::clone(&release));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                release.acquire().await.unwrap().forget();
                running.fetch_sub(1, Ordering::SeqCst);
            }
        })
    };
    let job = |name| Write {
        name,
        key: name.chars().next().unwrap(),
        gone: false,
    };
    // Two batches in flight take two jobs; four more wait; the next is
    // refused.
    for name in ["A", "B"] {
        batcher.submit(job(name)).unwrap();
    }
    while running.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    for name in ["C", "D", "E", "F"] {
        batcher.submit(job(name)).unwrap();
    }
    let refused = batcher.submit(job("G")).unwrap_err();
    assert!(matches!(refused, StoreError::Overloaded(_)), "{refused:?}");
    release.add_permits(6);
    while !batcher.shared.queue.lock().unwrap().is_empty() || running.load(Ordering::SeqCst) > 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(most.load(Ordering::SeqCst), 2, "never more batches than slots");
}

/// A closed-loop caller for the gathering tests: one call in flight,
/// a round trip of 1 ms between an answer and its next call (the
/// paused clock counts whole milliseconds).
struct Call {
    key: usize,
    reply: tokio::sync::oneshot::Sender<()>,
}

impl Job for Call {
    type Key = usize;
    fn key(&self) -> Option<&usize> {
        Some(&self.key)
    }
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// A batcher whose statements take 2 ms and record their sizes; the
/// `calls[k]` calls of caller `k` run in a closed loop, starting `k` ms
/// in, and the time each caller took is returned with the sizes.
async fn closed_loop(gather: Duration, calls: &[usize]) -> (Vec<usize>, Vec<Duration>) {
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let batcher = {
        let sizes = Arc::clone(&sizes);
        Arc::new(
            Batcher::new("write", 1, 64, 256, move |batch: Vec<Call>| {
                sizes.lock().unwrap().push(batch.len());
                async move {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    for call in batch {
                        let _ = call.reply.send(());
                    }
                }
            })
            .gathering(gather),
        )
    };
    let callers = calls.iter().enumerate().map(|(key, &n)| {
        let batcher = Arc::clone(&batcher);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(key as u64)).await;
            let started = Instant::now();
            for _ in 0..n {
                let (reply, answer) = tokio::sync::oneshot::channel();
                batcher.submit(Call { key, reply }).unwrap();
                answer.await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            started.elapsed()
        })
    });
    let took = futures::future::join_all(callers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let sizes = sizes.lock().unwrap().clone();
    (sizes, took)
}

#[tokio::test(start_paused = true)]
async fn without_gathering_closed_loop_callers_alternate_in_two_cohorts() {
    let (sizes, _) = closed_loop(Duration::ZERO, &[20, 20]).await;
    assert!(sizes.iter().all(|&n| n == 1), "{sizes:?}");
}

#[tokio::test(start_paused = true)]
async fn gathering_lets_the_callers_just_answered_ride_the_next_statement() {
    let (sizes, _) = closed_loop(Duration::from_millis(10), &[20, 20]).await;
    // The first statement carries the first caller alone (the second
    // starts later), and so does the last; between them both callers
    // share every statement.
    let between = &sizes[1..sizes.len() - 1];
    assert!(between.iter().all(|&n| n == 2), "{sizes:?}");
    assert_eq!(sizes.len(), 21, "{sizes:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lone_caller_never_waits_and_one_that_leaves_costs_one_wait() {
    let gather = Duration::from_millis(10);
    // 2 ms a statement and 1 ms a round trip: 3 ms a call.
    let call = Duration::from_millis(3);
    let (_, took) = closed_loop(gather, &[20]).await;
    assert!(took[0] <= call * 20, "{took:?}");
    // The second caller leaves after 5 calls: the first waits for it
    // once, and the statement after learns that it is alone.
    let (sizes, took) = closed_loop(gather, &[20, 5]).await;
    let calls: usize = sizes.iter().sum();
    assert_eq!(calls, 25);
    assert!(took[0] <= call * 20 + 2 * gather, "{took:?} {sizes:?}");
}

/// A job whose caller waits on a reply.
struct Replied {
    reply: tokio::sync::oneshot::Sender<()>,
}

impl Job for Replied {
    type Key = ();
    fn key(&self) -> Option<&()> {
        None
    }
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// A statement that never answers (a half-open connection after a
/// failover) must not hold its slot for good: past the bound its callers
/// hear that it was abandoned, and the next batch gets the slot.
#[tokio::test]
async fn a_batch_that_never_answers_frees_its_slot_at_the_bound() {
    let answering = Arc::new(AtomicBool::new(false));
    let batcher = {
        let answering = Arc::clone(&answering);
        Batcher::new("test", 1, 8, 64, move |batch: Vec<Replied>| {
            let answering = answering.load(Ordering::SeqCst);
            async move {
                if !answering {
                    std::future::pending::<()>().await;
                }
                for job in batch {
                    let _ = job.reply.send(());
                }
            }
        })
        .bounded_by(Duration::from_millis(200), Distrust::default())
    };
    let (reply, stuck) = tokio::sync::oneshot::channel();
    batcher.submit(Replied { reply }).unwrap();
    let started = std::time::Instant::now();
    assert!(
        stuck.await.is_err(),
        "the stuck batch's caller was answered as if it had been written"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "abandoned after {:?}",
        started.elapsed()
    );
    answering.store(true, Ordering::SeqCst);
    let (reply, next) = tokio::sync::oneshot::channel();
    batcher.submit(Replied { reply }).unwrap();
    tokio::time::timeout(Duration::from_secs(2), next)
        .await
        .expect("the slot was freed for the next batch")
        .unwrap();
}
