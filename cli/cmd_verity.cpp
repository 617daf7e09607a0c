// blkcrypt verity: build (format), check (verify) and show (dump) dm-verity
// hash trees, with veritysetup's option names and output.
//
// format writes a separate HASH through the output policy (output_file.hpp):
// a regular file under a temporary name, starting from its old content so
// regions outside the tree survive; a block device in place. When HASH is
// DATA, the tree goes into the data file past the data, which is never touched.
#include "commands.hpp"
#include "json.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "progress.hpp"
#include "serve.hpp"
#include "verity_actions.hpp"
#include "verity_fec.hpp"
#include "verity_params.hpp"
#include "verity_sig.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/verity/fec.hpp>
#include <blkcrypt/verity/superblock.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <algorithm>
#include <iostream>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

namespace cli {
namespace {

namespace vy = blkcrypt::verity;


vy::TreeOptions tree_options(const po::variables_map& vm, Progress& progress) {
    vy::TreeOptions o;
    o.threads = vm["threads"].as<unsigned>();
    o.mode = vm["async"].as<bool>() ? vy::HashMode::Async : vy::HashMode::Auto;
    o.progress = [&progress](uint64_t done, uint64_t) {
        progress.update(done);
        return true;  // a signal ends the process from its handler
    };
    return o;
}

int run_format(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 2) throw UsageError("format takes DATA and HASH");
    const std::string& data_path = files[0];
    const std::string& hash_path = files[1];
    const bool in_place = same_file(data_path, hash_path);
    Store data = open_store(data_path, in_place, "DATA");
    auto params = params_from_options(vm, data->size(), true);
    blkcrypt::Registry& reg = registry();
    auto geometry = vy::plan_tree(reg, params);
    if (!geometry) throw UsageError(geometry.error().message);
    uint64_t need = geometry->hash_device_size(params);
    const auto fec = fec_from_options(vm);
    // FEC parity: its own file, or in HASH (in DATA when HASH is DATA) at --fec-offset.
    const bool fec_on_hash = fec && (same_file(fec->device, hash_path) || (in_place && same_file(fec->device, data_path)));
    if (fec && !fec_on_hash && same_file(fec->device, data_path))
        throw UsageError("--fec-device: DATA holds the parity only when HASH is DATA");
    std::optional<vy::FecGeometry> fec_geom;
    if (fec_on_hash) {
        if (fec->offset < need)
            throw UsageError("--fec-offset " + std::to_string(fec->offset) + " overlaps the hash tree, which ends at " +
                             std::to_string(need));
        auto g = vy::fec_geometry(params, *geometry, fec->roots,
                                  vy::fec_covered_blocks(params, *geometry, fec->offset), fec->offset);
        if (!g) throw UsageError(g.error().message);
        fec_geom = *g;
        need = fec->offset + g->parity_bytes();
    }

    // Both outputs are opened (and checked) before the work, and appear together.
    std::optional<Output> hash_out, root_out, fec_out;
    Store hash;
    if (in_place) {
        if (params.hash_offset < params.data_blocks * params.data_block_size)
            throw UsageError("--hash-offset must be past the data when HASH is DATA");
    } else {
        // Starting from the old content: regions outside the tree survive.
        hash_out.emplace(hash_path, OutputOptions{.role = "HASH", .keep_content = true,
                                                  .inputs = {{"DATA", data_path}}});
    }
    if (vm.count("root-hash-file") && vm["root-hash-file"].as<std::string>() == "-")
        throw UsageError("--root-hash-file cannot be stdout: the summary is printed there");
    if (vm.count("root-hash-file"))
        root_out.emplace(vm["root-hash-file"].as<std::string>(),
                         OutputOptions{.role = "--root-hash-file", .can_stream = true,
                                       .inputs = {{"DATA", data_path}, {"HASH", hash_path}}});
    if (in_place) {
        // DATA grows to hold the tree; a device cannot.
        struct stat st {};
        if (data->size() < need && ::stat(data_path.c_str(), &st) == 0 && S_ISBLK(st.st_mode))
            throw Failure(data_path + ": the device holds " + std::to_string(data->size()) + " bytes; " +
                          std::to_string(need) + " are needed");
        if (data->size() < need && ::truncate(data_path.c_str(), static_cast<off_t>(need)) != 0)
            throw Failure(errno_message(data_path));
        data = hash = open_store(data_path, true, "DATA");
    } else {
        hash_out->reserve(need);
        hash = hash_out->store();
    }
    Store fec_store = fec_on_hash ? hash : nullptr;
    if (fec && !fec_on_hash) {
        // veritysetup covers the whole hash device, including what lies past the tree.
        auto g = vy::fec_geometry(params, *geometry, fec->roots,
                                  vy::fec_covered_blocks(params, *geometry, hash->size()), fec->offset);
        if (!g) throw UsageError(g.error().message);
        fec_geom = *g;
        fec_out.emplace(fec->device, OutputOptions{.role = "--fec-device", .keep_content = true,
                                                   .inputs = {{"DATA", data_path}, {"HASH", hash_path}}});
        fec_out->reserve(fec->offset + g->parity_bytes());
        fec_store = fec_out->store();
    }
    const bool json = vm["json"].as<bool>();
    Progress progress(progress_settings(vm), data_path, params.data_blocks * params.data_block_size);
    auto result = vy::format_tree(reg, params, *data, *hash, tree_options(vm, progress));
    if (!result) throw Failure(result.error().message);
    progress.finish();
    if (fec_geom) {
        // A second bar: the encoder reads data and tree again, at its own pace.
        const uint64_t bs = fec_geom->block_size;
        Progress fec_progress(progress_settings(vm), fec->device, fec_geom->covered * bs);
        auto encoded = vy::fec_encode(*fec_geom, *data, *hash, *fec_store, vm["threads"].as<unsigned>(),
                                      [&fec_progress, bs](uint64_t done, uint64_t) {
                                          fec_progress.update(done * bs);
                                          return true;  // a signal ends the process from its handler
                                      });
        if (!encoded) throw Failure("--fec-device: " + encoded.error().message);
        fec_progress.finish();
    }
    hash.reset();
    fec_store.reset();
    const std::string root_hex = encode_hex(result->root_hash);
    try {
        if (root_out)
            root_out->write(blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(root_hex.data()), root_hex.size()));
        // HASH last: it is the commit point. Only a crash (SIGKILL, power) can
        // fall between the renames, and then the new root hash is on disk and the
        // complete new tree is HASH's temporary file, which the next run names.
        Output::commit_all({root_out ? &*root_out : nullptr, fec_out ? &*fec_out : nullptr,
                            hash_out ? &*hash_out : nullptr});
    } catch (const Failure&) {
        // HASH is not replaced, but the computed root is not lost either.
        std::cerr << "blkcrypt: root hash: " << root_hex << "\n";
        throw;
    }
    std::optional<FecSummary> fec_summary;
    if (fec_geom) fec_summary = FecSummary{fec->roots, fec_geom->parity_blocks(), fec_on_hash, fec->offset};
    print_verity_summary(hash_path, result->params, result->geometry, root_hex, json,
                         fec_summary ? &*fec_summary : nullptr);
    return 0;
}

int run_verify(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() < 2 || files.size() > 3) throw UsageError("verify takes DATA HASH [ROOT_HEX]");
    const auto root = root_hash_argument(vm, files);
    Store data = open_store(files[0], false, "DATA");
    Store hash = same_file(files[0], files[1]) ? data : open_store(files[1], false, "HASH");
    const auto params = load_params(vm, *hash, data->size());
    blkcrypt::Registry& reg = registry();
    auto geometry = vy::plan_tree(reg, params);
    if (!geometry) throw UsageError(geometry.error().message);
    if (root.size() != geometry->digest_size)
        throw UsageError("the root hash has " + std::to_string(root.size()) + " bytes; " +
                         params.hash_name + " needs " + std::to_string(geometry->digest_size));
    check_root_hash_signature(vm, root);  // before any block is read, as the kernel does at table load
    const bool json = vm["json"].as<bool>();
    Progress progress(progress_settings(vm), files[0], params.data_blocks * params.data_block_size);
    if (auto fec = fec_from_options(vm))
        return run_verify_fec(vm, files, *fec, params, *geometry, root, *data, *hash, tree_options(vm, progress), progress);
    if (vm["repair"].as<bool>() || vm.count("repair-to") || vm.count("repair-hash-to"))
        throw UsageError("--repair, --repair-to and --repair-hash-to need --fec-device");
    auto report = vy::verify_tree(reg, params, root, *data, *hash, tree_options(vm, progress));
    if (!report) throw Failure(report.error().message);
    progress.finish();
    if (json) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("ok"), w.boolean(report->ok());
        w.key("corrupted");
        json_corruptions(w, report->corruptions);
        w.end_object();
    }
    if (report->ok()) return 0;
    // A wrong image can have every block corrupted: name the first few.
    const auto& bad = report->corruptions;
    const uint64_t max = vm["max-errors"].as<uint64_t>();
    const std::size_t shown = max == 0 ? bad.size() : static_cast<std::size_t>(std::min<uint64_t>(max, bad.size()));
    for (std::size_t i = 0; i < shown; ++i) std::cerr << "blkcrypt: " << describe(bad[i]) << "\n";
    if (shown < bad.size())
        std::cerr << "blkcrypt: ... and " << bad.size() - shown << " more corrupted blocks (--max-errors 0 lists all)\n";
    // veritysetup verify's statuses: 2 (EPERM) for a corrupted data or hash
    // block, 1 when only the root hash does not match.
    const bool blocks = std::any_of(bad.begin(), bad.end(),
                                    [](const vy::Corruption& c) { return c.kind != vy::Corruption::RootHash; });
    throw StatusFailure("verification failed: " + std::to_string(bad.size()) + " corrupted block(s)",
                        blocks ? 2 : 1);
}

int run_dump(const po::variables_map& vm, const std::vector<std::string>& files) {
    if (files.size() != 1) throw UsageError("dump takes HASH");
    if (vm["no-superblock"].as<bool>()) throw UsageError("dump needs a superblock");
    Store hash = open_store(files[0], false, "HASH");
    const auto params = load_params(vm, *hash, 0);
    blkcrypt::Registry& reg = registry();
    auto geometry = vy::plan_tree(reg, params);
    if (!geometry) throw Failure(geometry.error().message);
    std::optional<FecSummary> fec_summary;
    if (const auto fec = fec_from_options(vm)) {
        // As veritysetup dump: the FEC device must open, but the counts come
        // from the sizes (covered to the FEC offset on HASH, else to HASH's end).
        const bool on_hash = same_file(fec->device, files[0]);
        if (!on_hash) open_store(fec->device, false, "--fec-device");
        if (params.data_block_size != params.hash_block_size)
            throw UsageError("--fec-device: FEC needs equal data and hash block sizes");
        const uint64_t covered = vy::fec_covered_blocks(params, *geometry, on_hash ? fec->offset : hash->size());
        const uint64_t rsn = 255 - fec->roots;
        fec_summary = FecSummary{fec->roots, (covered + rsn - 1) / rsn * fec->roots, on_hash, fec->offset};
    }
    print_verity_summary(files[0], params, *geometry, "", vm["json"].as<bool>(), fec_summary ? &*fec_summary : nullptr);
    return 0;
}

}  // namespace

int run_verity(Args args) {
    CommandLine cl{"blkcrypt verity format DATA HASH [options]\n"
                   "       blkcrypt verity verify DATA HASH [ROOT_HEX] [options]\n"
                   "       blkcrypt verity dump HASH [--hash-offset BYTES] [--fec-device F [--fec-roots N]]\n"
                   "       blkcrypt verity table DATA HASH ROOT_HEX [options]\n"
                   "       blkcrypt verity read (--table LINE | DATA HASH ROOT_HEX) [--out FILE] [options]\n"
                   "       blkcrypt verity serve (--table LINE | DATA HASH ROOT_HEX) (--socket PATH | --port N)\n"
                   "       blkcrypt verity sign ROOT_HEX --key KEY --cert CERT --out SIG",
                   "Build, check or show a dm-verity hash tree as veritysetup does. HASH may be\n"
                   "DATA itself (the tree then goes past the data, at --hash-offset). verify exits\n"
                   "0 only when every block matches; it names each corrupted block. table prints the\n"
                   "dm-verity table line cryptsetup would load; read serves the data through the\n"
                   "verity read path (per-block checks, kernel policies), like reading /dev/mapper;\n"
                   "serve makes that view a read-only NBD device (docs/nbd.md). sign makes the\n"
                   "PKCS#7 root hash signature the kernel checks (--root-hash-signature)."};
    add_verity_options(cl.options);
    add_fec_options(cl.options);
    add_serve_options(cl.options);
    add_progress_options(cl.options);
    add_signature_options(cl.options);
    add_action_arguments(cl, {{"format", "build the hash tree of DATA into HASH and print the root hash"},
                              {"verify", "check DATA against HASH and the root hash"},
                              {"dump", "print the superblock of HASH"},
                              {"table", "print the dm-verity table line for dmsetup"},
                              {"read", "read DATA through the verity target, checking every block"},
                              {"serve", "serve DATA over NBD, read-only, every block checked on read"},
                              {"sign", "sign a root hash (PKCS#7, as the kernel's root_hash_sig_key_desc check wants)"}});
    // Which action honours what (the rest go with every action).
    const std::vector<std::string> params = {"hash", "data-block-size", "hash-block-size", "data-blocks",
                                             "salt", "uuid", "format"};
    only_for(cl, {"format", "verify", "table", "read", "serve"}, params);
    only_for(cl, {"format", "verify", "table", "read", "serve"}, {"no-superblock", "root-hash-file"});
    only_for(cl, {"format", "verify", "read", "serve"}, {"threads", "async"});
    only_for(cl, {"format", "verify", "read"}, progress_option_names());
    only_for(cl, {"table", "read", "serve"}, {"ignore-corruption", "restart-on-corruption", "panic-on-corruption",
                                     "ignore-zero-blocks", "check-at-most-once"});
    only_for(cl, {"read", "serve"}, {"table"});
    only_for(cl, {"read", "sign"}, {"out"});
    only_for(cl, {"verify", "table", "read", "serve"}, signature_check_option_names());
    only_for(cl, {"table"}, {"sig-key-desc", "name"});
    only_for(cl, {"sign"}, {"key", "cert"});
    only_for(cl, {"format", "verify", "dump", "table", "read", "serve"}, fec_option_names());
    only_for(cl, {"verify"}, repair_option_names());
    only_for(cl, {"serve"}, serve_option_names());
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto [action, files] = action_arguments(*vm);
    if (action == "format") return run_format(*vm, files);
    if (action == "verify") return run_verify(*vm, files);
    if (action == "dump") return run_dump(*vm, files);
    if (action == "table") return run_verity_table(*vm, files);
    if (action == "read") return run_verity_read(*vm, files);
    if (action == "serve") return run_verity_serve(*vm, files);
    if (action == "sign") return run_verity_sign(*vm, files);
    throw UsageError("unknown action '" + action + "': use format, verify, dump, table, read, serve or sign");
}

}  // namespace cli
