#include "alloc_count.hpp"
#include "toy_algs.hpp"

#include "../../templates/cryptd_queue.hpp"

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <future>
#include <semaphore>
#include <random>
#include <thread>

using namespace blkcrypt;

namespace blkcrypt {
std::shared_ptr<Template> make_cryptd_template();
}

namespace {
SelftestOutcome pass_all(const Alg&, bool) { return {SelftestState::Passed, "ok"}; }

std::vector<uint8_t> random_bytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}
}  // namespace

TEST_CASE("cryptd(skcipher) equals the sync result and completes on a worker", "[cryptd]") {
    Registry reg(pass_all);
    REQUIRE(reg.register_template(make_cryptd_template()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 9)));
    auto sync = Skcipher::alloc(reg, "toy");
    auto async = Skcipher::alloc(reg, "cryptd(toy)");
    REQUIRE(sync);
    REQUIRE(async);
    CHECK(async->is_async());
    CHECK(async->info().name == "cryptd(toy)");
    CHECK(async->info().driver == "cryptd(toy-a)");
    CHECK(async->info().priority == 150);
    const uint8_t key[8] = {9, 8, 7, 6, 5, 4, 3, 2};
    REQUIRE(sync->setkey(key) == Status::Ok);
    REQUIRE(async->setkey(key) == Status::Ok);

    auto pt = random_bytes(4096, 1);
    std::vector<uint8_t> want(pt.size()), got(pt.size());
    REQUIRE(sync->encrypt(pt, want, {}) == Status::Ok);

    SgEntry src{pt.data(), pt.size()}, dst{got.data(), got.size()};
    SkcipherRequest req;
    req.src = SgList(&src, 1);
    req.dst = SgList(&dst, 1);
    req.len = pt.size();
    std::promise<std::pair<Status, std::thread::id>> done;
    req.complete = [&](Status s) {
        if (s != Status::InProgress) done.set_value({s, std::this_thread::get_id()});
    };
    REQUIRE(async->encrypt(req) == Status::InProgress);
    auto [st, tid] = done.get_future().get();
    CHECK(st == Status::Ok);
    CHECK(tid != std::this_thread::get_id());
    CHECK(got == want);

    // The blocking convenience call waits for the completion.
    std::vector<uint8_t> back(pt.size());
    REQUIRE(async->decrypt(got, back, {}) == Status::Ok);
    CHECK(back == pt);

    // An async request without a completion is refused, not lost.
    SkcipherRequest bare = req;
    bare.complete = nullptr;
    CHECK(async->encrypt(bare) == Status::Invalid);
}

TEST_CASE("cryptd refuses to wrap an async algorithm", "[cryptd]") {
    Registry reg(pass_all);
    REQUIRE(reg.register_template(make_cryptd_template()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100)));
    auto r = reg.lookup_any("cryptd(cryptd(toy))");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("already asynchronous") != std::string::npos);
}

TEST_CASE("many concurrent cryptd requests all complete correctly", "[cryptd]") {
    Registry reg(pass_all);
    REQUIRE(reg.register_template(make_cryptd_template()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 3)));
    auto sync = Skcipher::alloc(reg, "toy");
    auto async = Skcipher::alloc(reg, "cryptd(toy)");
    const uint8_t key[8] = {1, 1, 2, 3, 5, 8, 13, 21};
    REQUIRE(sync->setkey(key) == Status::Ok);
    REQUIRE(async->setkey(key) == Status::Ok);
    constexpr int kReqs = 3000;  // more than the queue holds: exercises the backlog
    std::vector<std::vector<uint8_t>> in(kReqs), out(kReqs);
    std::vector<SgEntry> src(kReqs), dst(kReqs);
    std::vector<SkcipherRequest> reqs(kReqs);
    std::atomic<int> finished{0}, in_progress_notes{0}, busy{0}, failed{0};
    std::promise<void> all;
    for (int i = 0; i < kReqs; ++i) {
        in[i] = random_bytes(8 * (1 + i % 16), i);
        out[i].assign(in[i].size(), 0);
        src[i] = {in[i].data(), in[i].size()};
        dst[i] = {out[i].data(), out[i].size()};
        reqs[i].src = SgList(&src[i], 1);
        reqs[i].dst = SgList(&dst[i], 1);
        reqs[i].len = in[i].size();
        reqs[i].flags = kMayBacklog;
        reqs[i].complete = [&](Status s) {
            if (s == Status::InProgress) { ++in_progress_notes; return; }
            if (s != Status::Ok) ++failed;  // Catch2 asserts only on the test thread
            if (++finished == kReqs) all.set_value();
        };
    }
    for (int i = 0; i < kReqs; ++i) {
        Status s = async->encrypt(reqs[i]);
        if (s == Status::Busy) ++busy;
        else REQUIRE(s == Status::InProgress);
    }
    all.get_future().get();
    CHECK(failed == 0);
    CHECK(in_progress_notes == busy);  // every backlogged request heard InProgress first
    for (int i = 0; i < kReqs; ++i) {
        std::vector<uint8_t> want(in[i].size());
        REQUIRE(sync->encrypt(in[i], want, {}) == Status::Ok);
        REQUIRE(out[i] == want);
    }
}

// A queue job that runs a std::function (the test's; the queue has none).
struct Fn {
    std::function<void()> f;
};
CryptdQueue::Job job_of(const Fn& run, const Fn* left = nullptr) {
    CryptdQueue::Job j;
    j.run = [](const CryptdQueue::Job& x) { static_cast<const Fn*>(x.owner)->f(); };
    j.owner = &run;
    if (left) {
        j.left_backlog = [](const CryptdQueue::Job& x) { static_cast<const Fn*>(x.req)->f(); };
        j.req = const_cast<Fn*>(left);
    }
    return j;
}

TEST_CASE("CryptdQueue: full queue backlogs or rejects", "[cryptd]") {
    CryptdQueue q(1, 1);
    std::promise<void> release;
    auto gate = release.get_future().share();
    std::promise<void> first_running;
    std::vector<std::string> events;
    std::mutex mu;
    auto note = [&](std::string e) { std::lock_guard lk(mu); events.push_back(std::move(e)); };

    const Fn run1{[&] { first_running.set_value(); gate.wait(); note("run1"); }};
    CHECK(q.enqueue(job_of(run1), false) == Status::InProgress);
    first_running.get_future().wait();  // job 1 is running; the queue is empty
    const Fn run2{[&] { note("run2"); }};
    CHECK(q.enqueue(job_of(run2), false) == Status::InProgress);  // fills the queue
    std::promise<void> third_ran;
    const Fn run3{[&] { note("run3"); third_ran.set_value(); }}, left3{[&] { note("left3"); }};
    CHECK(q.enqueue(job_of(run3, &left3), true) == Status::Busy);  // backlogged
    bool fourth_ran = false;
    const Fn run4{[&] { fourth_ran = true; }};
    CHECK(q.enqueue(job_of(run4), false) == Status::Busy);  // rejected
    release.set_value();
    third_ran.get_future().wait();
    std::lock_guard lk(mu);
    auto pos = [&](const char* e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
    CHECK(pos("left3") < pos("run3"));
    CHECK(pos("run1") < pos("run3"));
    CHECK(events.size() == 4);
    CHECK_FALSE(fourth_ran);
}

TEST_CASE("a cryptd request is queued without allocating", "[cryptd][alloc]") {
    if (!alloc_count::available()) {
        WARN("not counted: operator new is the sanitizer's here");
        return;
    }
    Registry reg(pass_all);
    REQUIRE(reg.register_template(make_cryptd_template()));
    REQUIRE(reg.register_alg(std::make_shared<toy::XorAlg>("toy-a", 100, 9)));
    auto async = Skcipher::alloc(reg, "cryptd(toy)");
    REQUIRE(async);
    const uint8_t key[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    REQUIRE(async->setkey(key) == Status::Ok);
    std::vector<uint8_t> buf(512, 7);
    SgEntry sg{buf.data(), buf.size()};
    SkcipherRequest req;
    req.src = req.dst = SgList(&sg, 1);
    req.len = buf.size();
    std::binary_semaphore done{0};
    std::atomic<int> failed{0};
    req.complete = [&](Status s) {  // two references: within std::function's own buffer
        if (s != Status::Ok) ++failed;
        done.release();
    };
    REQUIRE(async->encrypt(req) == Status::InProgress);  // warm: threads and ring made
    done.acquire();
    const std::size_t before = alloc_count::here();
    ::operator delete(::operator new(8));  // a call, which unlike new-expressions is not elided
    REQUIRE(alloc_count::here() == before + 1);  // the counter sees an allocation
    for (int i = 0; i < 100; ++i) {
        REQUIRE(async->encrypt(req) == Status::InProgress);
        done.acquire();
    }
    CHECK(alloc_count::here() == before + 1);  // none on the submitting thread
    CHECK(failed == 0);
}

TEST_CASE("cryptd(sha256) as an ahash equals sha256", "[cryptd]") {
    Registry reg;
    REQUIRE(register_defaults(reg));
    auto sh = Shash::alloc(reg, "sha256");
    auto ah = Ahash::alloc(reg, "cryptd(sha256)");
    REQUIRE(sh);
    REQUIRE(ah);
    CHECK(ah->is_async());
    auto data = random_bytes(100000, 42);
    std::vector<uint8_t> a(32), b(32);
    REQUIRE(sh->digest(data, a) == Status::Ok);
    REQUIRE(ah->digest(data, b) == Status::Ok);
    CHECK(a == b);
    // init / update in scatter-gather pieces / final, completions on workers
    auto req = ah->new_request();
    REQUIRE(req);
    CryptoWait w;
    std::vector<SgEntry> sg = {{data.data(), 7}, {data.data() + 7, 50000 - 7}};
    req->src = sg;
    req->nbytes = 50000;
    req->result = b;
    std::fill(b.begin(), b.end(), 0);
    req->complete = w.callback();
    REQUIRE(w.wait(ah->init(*req)) == Status::Ok);
    req->complete = w.callback();
    REQUIRE(w.wait(ah->update(*req)) == Status::Ok);
    SgEntry rest{data.data() + 50000, data.size() - 50000};
    req->src = SgList(&rest, 1);
    req->nbytes = rest.len;
    req->complete = w.callback();
    REQUIRE(w.wait(ah->finup(*req)) == Status::Ok);
    CHECK(a == b);
    // The instance passed sha256's vectors.
    for (const auto& s : reg.list())
        if (s.info.name == "cryptd(sha256)") CHECK(s.selftest == SelftestState::Passed);
}
