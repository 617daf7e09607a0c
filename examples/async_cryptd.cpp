// async_cryptd: asynchronous requests. cryptd(X) runs X on worker threads:
// encrypt() returns InProgress and the completion callback reports the
// result later. Many requests are submitted at once (with kMayBacklog, so a
// full queue backlogs them instead of refusing), counted back in, and the
// output is compared with the synchronous xts(aes). An ahash digest through
// cryptd(sha256) is waited for with CryptoWait.
#include <blkcrypt/ahash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <vector>

using namespace blkcrypt;

int main() {
    Registry reg;
    if (auto r = register_defaults(reg); !r) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        return 1;
    }
    auto async = Skcipher::alloc(reg, "cryptd(xts(aes))");
    auto sync = Skcipher::alloc(reg, "xts(aes)");
    if (!async || !sync) return 1;
    std::vector<uint8_t> key(64);  // AES-256-XTS: two different 32-byte halves
    for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i * 13 + 1);
    if (async->setkey(key) != Status::Ok || sync->setkey(key) != Status::Ok) return 1;

    constexpr int kReqs = 256;
    constexpr std::size_t kLen = 512;
    // Requests own nothing: buffers, IVs and sg entries must outlive them.
    std::vector<std::vector<uint8_t>> in(kReqs), out(kReqs), iv(kReqs);
    std::vector<SgEntry> src(kReqs), dst(kReqs);
    std::vector<SkcipherRequest> reqs(kReqs);
    std::mutex mu;
    std::condition_variable cv;
    int pending = kReqs, failed = 0;

    for (int i = 0; i < kReqs; ++i) {
        in[i].assign(kLen, static_cast<uint8_t>(i));
        out[i].assign(kLen, 0);
        iv[i].assign(async->ivsize(), 0);
        iv[i][0] = static_cast<uint8_t>(i);  // "sector" i
        src[i] = {in[i].data(), kLen};
        dst[i] = {out[i].data(), kLen};
        SkcipherRequest& r = reqs[i];
        r.src = SgList(&src[i], 1);
        r.dst = SgList(&dst[i], 1);
        r.len = kLen;
        r.iv = iv[i];
        r.flags = kMayBacklog;
        r.complete = [&](Status s) {  // runs on a cryptd worker thread
            if (s == Status::InProgress) return;  // left the backlog; not done yet
            std::lock_guard lk(mu);
            if (s != Status::Ok) ++failed;
            if (--pending == 0) cv.notify_one();
        };
    }
    for (auto& r : reqs) {
        Status s = async->encrypt(r);
        if (s == Status::Ok) {  // finished synchronously: no callback will come
            std::lock_guard lk(mu);
            --pending;
        } else if (s != Status::InProgress && s != Status::Busy) {  // Busy = backlogged
            std::fprintf(stderr, "submit: %s\n", to_string(s));
            return 1;  // (a real program would first wait for what was accepted)
        }
    }
    {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return pending == 0; });
    }

    int mismatches = 0;
    for (int i = 0; i < kReqs; ++i) {
        std::vector<uint8_t> want(kLen), siv(sync->ivsize(), 0);
        siv[0] = static_cast<uint8_t>(i);
        if (sync->encrypt(in[i], want, siv) != Status::Ok || want != out[i]) ++mismatches;
    }
    std::printf("%s: %d requests, %d failed, %d differ from %s\n", async->info().driver.c_str(),
                kReqs, failed, mismatches, sync->info().driver.c_str());

    // One ahash request, waited for with CryptoWait.
    auto ah = Ahash::alloc(reg, "cryptd(sha256)");
    auto sh = Shash::alloc(reg, "sha256");
    if (!ah || !sh) return 1;
    auto req = ah->new_request();
    if (!req) return 1;
    std::vector<uint8_t> msg(100000, 'x'), d1(32), d2(32);
    SgEntry seg{msg.data(), msg.size()};
    req->src = SgList(&seg, 1);
    req->nbytes = msg.size();
    req->result = d1;
    req->flags = kMayBacklog;
    CryptoWait wait;
    req->complete = wait.callback();
    Status s = wait.wait(ah->digest(*req));
    const bool hash_ok = s == Status::Ok && sh->digest(msg, d2) == Status::Ok && d1 == d2;
    std::printf("%s: digest %s sha256\n", ah->info().driver.c_str(),
                hash_ok ? "equals" : "DIFFERS from");
    return failed == 0 && mismatches == 0 && hash_ok ? 0 : 1;
}
