// blkcrypt verity table|read, and the helpers every verity action shares.
// read serves the data through VerityTarget, as reading /dev/mapper/NAME of
// a dm-verity device would: each block is checked when it is read.
#include "container_common.hpp"
#include "json.hpp"
#include "output_file.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "serve.hpp"
#include "verity_actions.hpp"
#include "verity_fec.hpp"
#include "verity_params.hpp"
#include "verity_sig.hpp"

#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace cli {

namespace vy = blkcrypt::verity;
namespace dm = blkcrypt::dm;

Store open_store(const std::string& path, bool writable, const std::string& role) {
    auto s = blkcrypt::open_store(path, writable);
    if (!s) refuse_device(path, role, s.error().message);
    return *s;
}

vy::VerityParams load_params(const po::variables_map& vm, dm::BackingStore& hash, uint64_t data_size) {
    if (vm["no-superblock"].as<bool>()) return params_from_options(vm, data_size, false);
    const uint64_t off = vm["hash-offset"].as<uint64_t>();
    std::array<uint8_t, vy::kSuperblockSize> sb{};
    if (hash.size() < off + sb.size() || hash.read(off, sb) != blkcrypt::Status::Ok)
        throw Failure("the hash device is too short to hold a superblock at offset " + std::to_string(off));
    auto p = vy::decode_superblock(sb);
    if (!p) throw Failure(p.error().message);
    p->hash_offset = off;
    check_superblock_options(vm, *p, registry());
    return *p;
}

std::vector<uint8_t> root_hash_argument(const po::variables_map& vm, const std::vector<std::string>& files) {
    std::string hex;
    if (files.size() == 3 && vm.count("root-hash-file"))
        throw UsageError("give the root hash as ROOT_HEX or with --root-hash-file, not both");
    if (files.size() == 3) {
        hex = files[2];
    } else if (vm.count("root-hash-file")) {
        const auto bytes = read_all(vm["root-hash-file"].as<std::string>());
        hex.assign(bytes.begin(), bytes.end());
        while (!hex.empty() && (hex.back() == '\n' || hex.back() == ' ')) hex.pop_back();
    } else {
        throw UsageError("give the root hash as ROOT_HEX or with --root-hash-file");
    }
    return decode_hex(hex, "root hash");
}

std::string describe(const vy::Corruption& c) {
    switch (c.kind) {
    case vy::Corruption::DataBlock: return "data block " + std::to_string(c.block) + " is corrupted";
    case vy::Corruption::HashBlock:
        return "hash block " + std::to_string(c.block) + " (tree level " + std::to_string(c.level) +
               ") is corrupted";
    case vy::Corruption::RootHash: break;
    }
    return "the root hash does not match the top hash block (block " + std::to_string(c.block) + ")";
}

void json_corruptions(JsonWriter& w, const std::vector<vy::Corruption>& bad) {
    w.begin_array();
    for (const auto& c : bad) {
        w.begin_object();
        w.key("kind"), w.string(c.kind == vy::Corruption::DataBlock   ? "data"
                                : c.kind == vy::Corruption::HashBlock ? "hash"
                                                                      : "root");
        w.key("block"), w.number(static_cast<int64_t>(c.block));
        w.key("level"), w.number(c.level);
        w.end_object();
    }
    w.end_array();
}

namespace {

void apply_policies(const po::variables_map& vm, vy::VerityTable& t) {
    if (vm["ignore-corruption"].as<bool>()) t.on_corruption = vy::CorruptionMode::Ignore;
    if (vm["restart-on-corruption"].as<bool>()) t.on_corruption = vy::CorruptionMode::Restart;
    if (vm["panic-on-corruption"].as<bool>()) t.on_corruption = vy::CorruptionMode::Panic;
    if (vm["ignore-zero-blocks"].as<bool>()) t.ignore_zero_blocks = true;
    if (vm["check-at-most-once"].as<bool>()) t.check_at_most_once = true;
}

// The table for DATA HASH ROOT_HEX (parameters from the superblock or options).
vy::VerityTable table_from_files(blkcrypt::Registry& reg, const po::variables_map& vm,
                                 const std::vector<std::string>& files) {
    if (files.size() < 2 || files.size() > 3) throw UsageError("give DATA HASH [ROOT_HEX]");
    const auto root = root_hash_argument(vm, files);
    Store data = open_store(files[0], false, "DATA");
    Store hash = open_store(files[1], false, "HASH");
    const auto params = load_params(vm, *hash, data->size());
    auto g = vy::plan_tree(reg, params);
    if (!g) throw UsageError(g.error().message);
    auto t = vy::make_verity_table(params, *g, root, files[0], files[1]);
    apply_policies(vm, t);
    apply_fec_options(vm, t, params, *g, hash->size());
    if (check_root_hash_signature(vm, t.root_hash)) t.root_hash_sig_key_desc = signature_key_description(vm, params);
    return t;
}

}  // namespace

int run_verity_table(const po::variables_map& vm, const std::vector<std::string>& files) {
    blkcrypt::Registry& reg = registry();
    const auto t = table_from_files(reg, vm, files);
    if (vm["json"].as<bool>()) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("table"), w.string(t.line());
        w.key("data_device"), w.string(t.data_dev);
        w.key("hash_device"), w.string(t.hash_dev);
        w.key("hash_algorithm"), w.string(t.params.hash_name);
        w.key("data_block_size"), w.number(t.params.data_block_size);
        w.key("hash_block_size"), w.number(t.params.hash_block_size);
        w.key("data_blocks"), w.number(static_cast<int64_t>(t.params.data_blocks));
        w.key("hash_start_block"), w.number(static_cast<int64_t>(t.hash_start_block));
        w.key("root_hash"), w.string(encode_hex(t.root_hash));
        if (!t.fec.device.empty()) {
            w.key("fec_device"), w.string(t.fec.device);
            w.key("fec_start"), w.number(static_cast<int64_t>(t.fec.start));
            w.key("fec_blocks"), w.number(static_cast<int64_t>(t.fec.blocks));
            w.key("fec_roots"), w.number(t.fec.roots);
        }
        if (!t.root_hash_sig_key_desc.empty()) w.key("root_hash_sig_key_desc"), w.string(t.root_hash_sig_key_desc);
        w.end_object();
    } else {
        std::cout << t.line() << "\n";
    }
    return 0;
}

namespace {

// --table LINE or DATA HASH ROOT_HEX, with the policy options applied.
vy::VerityTable read_table(blkcrypt::Registry& reg, const po::variables_map& vm,
                           const std::vector<std::string>& files) {
    if (vm.count("table")) {
        if (!files.empty()) throw UsageError("give either --table or DATA HASH ROOT_HEX");
        auto t = vy::parse_verity_table(vm["table"].as<std::string>());
        if (!t) throw UsageError("--table: " + t.error().message);
        vy::VerityTable table = std::move(*t);
        apply_policies(vm, table);
        // The kernel would take the signature from its keyring; here it is a file.
        if (!check_root_hash_signature(vm, table.root_hash) && !table.root_hash_sig_key_desc.empty())
            throw UsageError("the table names the signature key '" + table.root_hash_sig_key_desc +
                             "': give the signature with --root-hash-signature");
        return table;
    }
    return table_from_files(reg, vm, files);
}

}  // namespace

// verity serve: the verified data, read-only, over NBD.
int run_verity_serve(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (vm.count("table"))
        refuse_given(vm, {"hash", "data-block-size", "hash-block-size", "data-blocks", "salt", "uuid", "format",
                          "no-superblock", "hash-offset", "root-hash-file"},
                     "the --table line gives the parameters");
    block_stop_signals();  // before any thread exists
    blkcrypt::Registry& reg = registry();
    vy::VerityTable table = read_table(reg, vm, files);
    Store data = open_store(table.data_dev, false, "DATA");
    Store hash = same_file(table.data_dev, table.hash_dev) ? data : open_store(table.hash_dev, false, "HASH");
    vy::VerityTargetOptions topts;
    topts.mode = vm["async"].as<bool>() ? vy::HashMode::Async : vy::HashMode::Auto;
    topts.log = [](const vy::Corruption& c) {
        static std::mutex mu;
        std::lock_guard lk(mu);
        std::cerr << "blkcrypt: " << describe(c) << "\n";
    };
    topts.fec_device = fec_store_for(table, data, hash);
    auto target = vy::VerityTarget::create(reg, table, data, hash, topts);
    if (!target) throw Failure(target.error().message);
    auto dev = blkcrypt::dm::make_verity_device(std::move(target).value(),
                                                 vm.count("threads") ? vm["threads"].as<unsigned>() : 0,
                                                 "verity " + table.data_dev);
    if (!dev) throw UsageError(dev.error().message);
    return serve_device(vm, *dev);
}

int run_verity_read(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (vm.count("out") && vm["out"].as<std::string>() == "-" && vm["progress-json"].as<bool>())
        throw UsageError("--progress-json prints to stdout, which --out - already uses");
    if (vm.count("table"))
        refuse_given(vm, {"hash", "data-block-size", "hash-block-size", "data-blocks", "salt", "uuid", "format",
                          "no-superblock", "hash-offset", "root-hash-file"},
                     "the --table line gives the parameters");
    blkcrypt::Registry& reg = registry();
    vy::VerityTable table = read_table(reg, vm, files);
    Store data = open_store(table.data_dev, false, "DATA");
    Store hash = same_file(table.data_dev, table.hash_dev) ? data : open_store(table.hash_dev, false, "HASH");

    std::mutex log_mu;
    vy::VerityTargetOptions topts;
    topts.mode = vm["async"].as<bool>() ? vy::HashMode::Async : vy::HashMode::Auto;
    topts.log = [&log_mu](const vy::Corruption& c) {
        std::lock_guard lk(log_mu);
        std::cerr << "blkcrypt: " << describe(c) << "\n";
    };
    topts.fec_device = fec_store_for(table, data, hash);
    auto target = vy::VerityTarget::create(reg, table, data, hash, topts);
    if (!target) throw Failure(target.error().message);

    // --out: a file (chunks written where they belong, from any worker) or a
    // stream ("-", FIFO, character device), where chunks go out in order.
    std::optional<Output> out;
    if (vm.count("out") && vm["out"].as<std::string>() == "-" && vm["json"].as<bool>())
        throw UsageError("--out - and --json both write to stdout; give --out a file");
    if (vm.count("out")) {
        std::vector<NamedPath> inputs = {{"DATA", table.data_dev}, {"HASH", table.hash_dev}};
        if (vm.count("root-hash-file")) inputs.push_back({"--root-hash-file", vm["root-hash-file"].as<std::string>()});
        out.emplace(vm["out"].as<std::string>(),
                    OutputOptions{.role = "--out", .can_stream = true, .inputs = std::move(inputs)});
        out->reserve((*target)->size());
    }
    const uint64_t total = (*target)->size();
    const uint64_t chunk = std::max<uint64_t>(1 << 20, (*target)->block_size());
    std::atomic<uint64_t> next{0}, done{0};
    std::atomic<bool> failed{false};
    std::string error;
    std::mutex err_mu;
    std::mutex order_mu;
    std::condition_variable order_cv;
    uint64_t written = 0;  // stream: bytes out so far (under order_mu)
    auto fail = [&](std::string msg) {
        {
            std::lock_guard lk(err_mu);
            if (!failed.exchange(true)) error = std::move(msg);
        }
        std::lock_guard lk(order_mu);  // wakes the workers waiting for their turn
        order_cv.notify_all();
    };
    Progress progress(progress_settings(vm), table.data_dev, total);
    auto worker = [&] {
        std::vector<uint8_t> buf(chunk);
        for (;;) {
            // Chunks are handed out in order, so the one a stream waits for
            // is always held by a worker that will write it.
            const uint64_t pos = next.fetch_add(chunk);
            if (pos >= total || failed) return;
            const std::size_t n = static_cast<std::size_t>(std::min(chunk, total - pos));
            const blkcrypt::Status s = (*target)->read(pos, blkcrypt::Bytes(buf).first(n));
            if (s != blkcrypt::Status::Ok) {
                fail("read at byte " + std::to_string(pos) + " failed: " + blkcrypt::to_string(s));
                return;
            }
            try {
                if (out && out->seekable()) {
                    out->pwrite(blkcrypt::ConstBytes(buf).first(n), pos);
                } else if (out) {
                    std::unique_lock lk(order_mu);
                    order_cv.wait(lk, [&] { return written == pos || failed; });
                    if (failed) return;
                    out->write(blkcrypt::ConstBytes(buf).first(n));
                    written += n;
                    order_cv.notify_all();
                }
            } catch (const Failure& e) {
                fail(e.what());
                return;
            }
            done += n;
        }
    };
    const unsigned threads = vm["threads"].as<unsigned>() ? vm["threads"].as<unsigned>()
                                                          : std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    pool.reserve(threads);
    // Near the thread limit: read with the threads that could be started.
    for (unsigned i = 0; i < threads; ++i) {
        try {
            pool.emplace_back(worker);
        } catch (const std::system_error&) {
            // EAGAIN may pass (another thread exited): try the others too.
        }
    }
    if (pool.empty()) worker();  // none at all: read on this thread
    while (done < total && !failed) {
        progress.update(done);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& t : pool) t.join();
    if (failed) throw Failure(error);
    progress.finish();
    if (out) out->commit();
    const auto st = (*target)->stats();
    if (vm["json"].as<bool>()) {
        std::cout << "{\"status\": \"" << (*target)->status_char() << "\", \"data_blocks_verified\": "
                  << st.data_blocks_verified << ", \"hash_blocks_verified\": " << st.hash_blocks_verified
                  << ", \"zero_blocks_skipped\": " << st.zero_blocks_skipped
                  << ", \"corruptions\": " << st.corruptions << ", \"fec_corrected\": " << st.fec_corrected << "}\n";
    }
    return 0;
}

}  // namespace cli
