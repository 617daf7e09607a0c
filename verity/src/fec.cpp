// dm-verity FEC: parity computation and single-block reconstruction.
//
// Encoding goes by bands of consecutive rounds: for a band, each of the rsn
// symbol positions is one contiguous run of message blocks (rounds apart
// from the next position's), read once and multiply-accumulated into the
// band's parity rows. So the image is read once, in runs of about 256 KiB,
// and each band's parity is one contiguous write; bands run on the pool.
#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/reed_solomon.hpp>

#include "task_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

namespace blkcrypt::verity {

namespace {

constexpr uint64_t kBandBytes = 256u << 10;

// Message blocks [m, m + count) into buf: data, then hash area, then zeros.
Status read_message(const FecGeometry& g, BackingStore& data, BackingStore& hash, uint64_t m,
                    uint64_t count, uint8_t* buf) {
    const uint64_t bs = g.block_size;
    while (count) {
        uint64_t n = count;
        Status st = Status::Ok;
        if (m < g.data_blocks) {
            n = std::min(n, g.data_blocks - m);
            st = data.read(m * bs, Bytes(buf, n * bs));
        } else if (m < g.covered) {
            n = std::min(n, g.covered - m);
            st = hash.read((g.hash_start + m - g.data_blocks) * bs, Bytes(buf, n * bs));
        } else {
            std::memset(buf, 0, count * bs);
            return Status::Ok;
        }
        if (st != Status::Ok) return st;
        m += n, count -= n, buf += n * bs;
    }
    return Status::Ok;
}

std::string io_error(const char* what, uint64_t block) {
    return std::string("cannot read ") + what + " (message block " + std::to_string(block) + ")";
}

}  // namespace

uint64_t fec_covered_blocks(const VerityParams& p, const TreeGeometry& g, uint64_t hash_end) noexcept {
    uint64_t blocks = hash_end / p.data_block_size;
    blocks = blocks > g.hash_start_block ? blocks - g.hash_start_block : 0;
    return blocks + p.data_blocks;
}

Result<FecGeometry> fec_geometry(const VerityParams& p, const TreeGeometry& tg, uint32_t roots,
                                 uint64_t covered, uint64_t offset) {
    if (p.data_block_size != p.hash_block_size)
        return make_error(Status::Invalid, "FEC needs equal data and hash block sizes");
    if (roots < kFecMinRoots || roots > kFecMaxRoots)
        return make_error(Status::Invalid, "FEC roots must be in 2..24, not " + std::to_string(roots));
    if (offset % 512) return make_error(Status::Invalid, "the FEC offset must be a multiple of 512");
    const uint64_t tree_end = tg.hash_start_block + tg.total_hash_blocks();
    if (covered < p.data_blocks + (tree_end - tg.hash_start_block))
        return make_error(Status::Invalid, "the FEC area covers " + std::to_string(covered) +
                                               " blocks, fewer than the data and the hash tree");
    FecGeometry g;
    g.roots = roots;
    g.rsn = 255 - roots;
    g.block_size = p.data_block_size;
    g.data_blocks = p.data_blocks;
    g.hash_start = tg.hash_start_block;
    g.covered = covered;
    g.rounds = (covered + g.rsn - 1) / g.rsn;
    g.offset = offset;
    return g;
}

uint64_t fec_message_block_of_hash(const FecGeometry& g, uint64_t hash_block) noexcept {
    if (hash_block < g.hash_start) return UINT64_MAX;
    const uint64_t m = g.data_blocks + (hash_block - g.hash_start);
    return m < g.covered ? m : UINT64_MAX;
}

Result<void> fec_encode(const FecGeometry& g, BackingStore& data, BackingStore& hash, BackingStore& fec,
                        unsigned threads, const std::function<bool(uint64_t, uint64_t)>& progress) {
    auto rs = ReedSolomon::create(g.roots);
    if (!rs) return rs.error();
    const uint64_t bs = g.block_size;
    const uint64_t band = std::max<uint64_t>(1, kBandBytes / bs);  // rounds per band
    const uint64_t bands = (g.rounds + band - 1) / band;
    TaskPool pool(resolve_threads(threads));
    const unsigned workers = std::max(1u, pool.threads());

    struct Work {
        std::vector<uint8_t> chunk, rows, out;
    };
    std::vector<Work> work(workers);
    std::atomic<uint64_t> done{0};
    std::atomic<bool> stopped{false};
    std::mutex progress_mu;
    std::string failure;
    std::mutex failure_mu;
    auto fail = [&](std::string msg) {
        std::lock_guard lk(failure_mu);
        if (failure.empty()) failure = std::move(msg);
        return Status::IoError;
    };

    const Status st = pool.run(bands, [&](std::size_t part, unsigned worker) -> Status {
        if (stopped.load(std::memory_order_relaxed)) return Status::Interrupted;
        Work& w = work[worker];
        const uint64_t n0 = part * band, n1 = std::min(g.rounds, n0 + band);
        const uint64_t len = (n1 - n0) * bs;  // codewords in this band
        w.chunk.resize(len);
        // Rows a power of two apart share cache sets (24 rows thrash an
        // 8-way L1): a cache line more per row spreads them.
        const uint64_t stride = len + 64;
        w.rows.assign(stride * g.roots, 0);
        w.out.resize(len * g.roots);
        uint8_t* rows[kFecMaxRoots];
        for (unsigned j = 0; j < g.roots; ++j) rows[j] = w.rows.data() + j * stride;
        for (unsigned i = 0; i < g.rsn; ++i) {
            const uint64_t m = i * g.rounds + n0;
            if (m >= g.covered) break;  // zero padding adds nothing
            if (read_message(g, data, hash, m, n1 - n0, w.chunk.data()) != Status::Ok)
                return fail(io_error(m < g.data_blocks ? "the data" : "the hash device", m));
            rs->accumulate(i, w.chunk.data(), rows, len);
        }
        // Parity bytes go codeword after codeword.
        for (uint64_t p = 0; p < len; ++p)
            for (unsigned j = 0; j < g.roots; ++j) w.out[p * g.roots + j] = rows[j][p];
        const uint64_t at = g.offset + n0 * bs * g.roots;
        if (fec.write(at, w.out) != Status::Ok)
            return fail("cannot write " + std::to_string(w.out.size()) + " bytes of FEC parity at offset " +
                        std::to_string(at));
        const uint64_t now = done.fetch_add((n1 - n0) * g.rsn) + (n1 - n0) * g.rsn;
        if (progress) {
            std::lock_guard lk(progress_mu);
            if (!progress(std::min(now, g.covered), g.covered)) {
                stopped = true;
                return Status::Interrupted;
            }
        }
        return Status::Ok;
    });
    if (st == Status::Interrupted) return make_error(Status::Interrupted, "interrupted");
    if (st != Status::Ok) return make_error(st, failure.empty() ? "FEC encoding failed" : failure);
    if (fec.flush() != Status::Ok) return make_error(Status::IoError, "cannot flush the FEC device");
    return {};
}

Result<uint64_t> fec_correct_block(const FecGeometry& g, BackingStore& data, BackingStore& hash,
                                   BackingStore& fec, uint64_t m, Bytes out, std::span<const uint64_t> bad) {
    if (m >= g.covered || out.size() != g.block_size)
        return make_error(Status::Invalid, "block " + std::to_string(m) + " is not covered by FEC");
    auto rs = ReedSolomon::create(g.roots);
    if (!rs) return rs.error();
    const uint64_t bs = g.block_size, round = g.round_of(m);
    const unsigned target = g.symbol_of(m);
    // The rsn blocks of this round, one per symbol position.
    std::vector<uint8_t> blocks(static_cast<std::size_t>(g.rsn) * bs);
    for (unsigned i = 0; i < g.rsn; ++i) {
        const uint64_t b = i * g.rounds + round;
        if (read_message(g, data, hash, b, 1, &blocks[i * bs]) != Status::Ok)
            return make_error(Status::IoError, io_error("a block of the FEC group", b));
    }
    std::vector<uint8_t> parity(bs * g.roots);
    if (fec.read(g.offset + round * bs * g.roots, parity) != Status::Ok)
        return make_error(Status::IoError, "cannot read the FEC parity of round " + std::to_string(round));
    // Erasures: known-bad blocks of this round, while they fit in the code.
    std::vector<uint8_t> erasures;
    if (std::find(bad.begin(), bad.end(), m) != bad.end()) erasures.push_back(static_cast<uint8_t>(target));
    for (uint64_t b : bad)
        if (b < g.covered && g.round_of(b) == round && erasures.size() < g.roots) {
            const auto s = static_cast<uint8_t>(g.symbol_of(b));
            if (std::find(erasures.begin(), erasures.end(), s) == erasures.end()) erasures.push_back(s);
        }
    uint64_t corrected = 0;
    uint8_t word[ReedSolomon::kSymbols];
    for (uint64_t b = 0; b < bs; ++b) {
        for (unsigned i = 0; i < g.rsn; ++i) word[i] = blocks[i * bs + b];
        std::memcpy(word + g.rsn, &parity[b * g.roots], g.roots);
        const uint8_t before = word[target];
        if (rs->decode(word, erasures) < 0)
            return make_error(Status::Corrupt, "block " + std::to_string(m) + " cannot be corrected by FEC");
        out[b] = word[target];
        corrected += word[target] != before;
    }
    return corrected;
}

}  // namespace blkcrypt::verity
