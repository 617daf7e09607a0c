// See container_driver.hpp.
#include "container_driver.hpp"

#include "cryptsetup_options.hpp"
#include "image_copy.hpp"
#include "number_option.hpp"
#include "passphrase.hpp"
#include "progress.hpp"

#include <algorithm>
#include <future>
#include <iostream>

#include <unistd.h>

namespace cli {
namespace {

bool has_action(const ContainerFormat& f, const std::string& action) {
    return std::find(f.actions.begin(), f.actions.end(), action) != f.actions.end();
}

const OwnAction* own_action(const ContainerFormat& f, const std::string& action) {
    for (const OwnAction& o : f.own)
        if (o.action.name == action) return &o;
    return nullptr;
}

// The driver's actions the format has.
std::vector<std::string> driver_actions(const ContainerFormat& f) {
    std::vector<std::string> list;
    for (const char* a : {"dump", "test-passphrase", "decrypt", "serve", "table"})
        if (has_action(f, a)) list.push_back(a);
    return list;
}

// The help's action list, in the format's order.
std::vector<Action> actions(const ContainerFormat& f) {
    const std::string open = "cryptsetup " + f.open_name;
    std::vector<Action> list;
    for (const std::string& a : f.actions) {
        if (const OwnAction* o = own_action(f, a)) {
            list.push_back(o->action);
            continue;
        }
        list.push_back({a, a == "dump"              ? "print the metadata as cryptsetup " + f.dump_name + " does"
                           : a == "test-passphrase" ? "check a passphrase (" + open + " --test-passphrase)"
                           : a == "decrypt"         ? "write the plaintext " + open + " maps to OUT"
                           : a == "serve"           ? "serve that plaintext over NBD, read-write unless --read-only"
                                                    : "print the dm table " + open + " loads"});
    }
    return list;
}

std::string usage(const ContainerFormat& f) {
    if (!f.usage.empty()) return f.usage;
    const std::string cmd = "blkcrypt " + f.name + " ", opts = f.usage_options + " ";
    std::vector<std::string> lines;
    if (has_action(f, "dump"))
        lines.push_back(cmd + (has_action(f, "test-passphrase") ? "dump|test-passphrase " : "dump ") + opts + "IMAGE");
    if (has_action(f, "table")) lines.push_back(cmd + "table " + opts + "[--show-key] IMAGE");
    if (has_action(f, "decrypt")) lines.push_back(cmd + "decrypt " + opts + "IMAGE OUT");
    for (const OwnAction& o : f.own)
        if (!o.usage.empty()) lines.push_back(cmd + o.usage);
    if (has_action(f, "serve")) lines.push_back(cmd + "serve (--socket PATH | --port N) " + opts + "IMAGE");
    std::string text;
    for (const std::string& l : lines) text += (text.empty() ? "" : "\n       ") + l;
    return text;
}

std::string one_file(const ContainerFormat& f, const ActionArgs& a) {
    if (a.files.size() != 1) throw UsageError(f.name + " " + a.action + " needs exactly one IMAGE");
    return a.files[0];
}

// The table, or its refusal as a Failure.
blkcrypt::dm::DmTable checked_table(const OpenedContainer& c) {
    auto t = c.table();
    if (!t) throw Failure(t.error().message);
    return std::move(t).value();
}

void declare_options(const ContainerFormat& f, CommandLine& cl) {
    const std::vector<std::string> driver = driver_actions(f);
    auto add = cl.options.add_options();
    if (!f.key_file_help.empty())
        add("key-file,d", po::value<std::string>()->value_name("FILE"), f.key_file_help.c_str())
           ("keyfile-offset", number_value<uint64_t>(0, UINT64_MAX)->value_name("BYTES"), "skip BYTES of the key file")
           ("keyfile-size,l", number_value<uint64_t>(1, kMaxKeyFileSize)->value_name("BYTES"),
            "read exactly BYTES of the key file");
    if (f.passphrase)
        add("passphrase-file", po::value<std::string>()->value_name("FILE"), "the passphrase: the first line of FILE");
    if (!f.key_file_help.empty()) only_for(cl, driver, {"key-file", "keyfile-offset", "keyfile-size"});
    if (f.passphrase) only_for(cl, driver, {"passphrase-file"});
    if (f.add_options) f.add_options(cl);
    auto shared = cl.options.add_options();
    if (has_action(f, "dump")) {
        shared("dump-volume-key", po::bool_switch(), f.dump_volume_key_help.c_str());
        only_for(cl, {"dump"}, {"dump-volume-key"});
    }
    shared("show-key", po::bool_switch(), "table: print the key (dmsetup table --showkeys) instead of zeros")
          ("threads,t", threads_value()->value_name("N"), "crypt worker threads, at most 256 (default: one per core)")
          ("in-place", po::bool_switch(), "write into the existing regular file OUT directly");
    if (f.passphrase) {
        add_batch_mode_option(cl.options);
        add_tries_option(cl.options);
        only_for(cl, {"dump"}, {"batch-mode"});
        only_for(cl, driver, {"tries"});
    }
    add_progress_options(cl.options);
    add_serve_options(cl.options);
    add_action_arguments(cl, actions(f));
    only_for(cl, {"table"}, {"show-key"});
    only_for(cl, {"decrypt", "serve"}, {"threads"});
    only_for(cl, {"decrypt"}, {"in-place"});
    only_for(cl, {"decrypt"}, progress_option_names());
    only_for(cl, {"serve"}, serve_option_names());
    add_cryptsetup_options(cl, f.name);
}

int run_dump(const ContainerFormat& f, const po::variables_map& vm, const ActionArgs& a) {
    const auto c = f.open(vm, one_file(f, a), false);
    const bool show_key = vm["dump-volume-key"].as<bool>();
    if (!show_key && !f.dump_needs_secret) {
        std::vector<std::string> secrets = {"key-file", "keyfile-offset", "keyfile-size"};
        if (f.passphrase) secrets.push_back("passphrase-file");
        refuse_given(vm, secrets, "only with --dump-volume-key");
        std::cout << c->dump();
        return 0;
    }
    if (show_key) confirm_volume_key_dump(vm);
    c->unlock(vm);
    if (!show_key) {
        std::cout << c->dump() << std::flush;
        return 0;
    }
    const blkcrypt::SecureBuffer text = c->dump_volume_key();
    std::cout.flush();
    write_all(STDOUT_FILENO, text, "stdout");
    return 0;
}

// IMAGE opened, what the activation refuses refused, then unlocked (or the
// passphrase tested).
std::unique_ptr<OpenedContainer> unlocked(const ContainerFormat& f, const po::variables_map& vm,
                                          const std::string& image, bool writable, bool test = false) {
    auto c = f.open(vm, image, writable);
    if (f.precheck) (void)checked_table(*c);
    if (test)
        c->test_passphrase(vm);
    else
        c->unlock(vm);
    return c;
}

// A stacked table's device needs its lower tables built first; refused
// until the dm layer builds dm-integrity lines.
void refuse_stacked(const OpenedContainer& c, const std::string& action) {
    auto lower = c.lower_tables();
    if (!lower) throw Failure(lower.error().message);
    if (!lower->empty())
        throw Failure(c.path + ": " + action + " of a container stacked on dm-integrity (LUKS2 --integrity) is not "
                      "supported yet; `table` prints both tables");
}

int run_decrypt(const ContainerFormat& f, const po::variables_map& vm, const ActionArgs& a) {
    if (a.files.size() != 2) throw UsageError(f.name + " decrypt needs IMAGE and OUT");
    const std::string& image = a.files[0];
    std::vector<NamedPath> inputs = {{"IMAGE", image}};
    if (!f.key_file_help.empty() && vm.count("key-file"))
        inputs.push_back({"the key file", vm["key-file"].as<std::string>()});
    if (f.passphrase && vm.count("passphrase-file"))
        inputs.push_back({"the passphrase file", vm["passphrase-file"].as<std::string>()});
    if (f.add_inputs) f.add_inputs(vm, inputs);
    Output out(a.files[1], OutputOptions{.role = "OUT", .secret = true, .can_stream = true,
                                         .in_place = vm["in-place"].as<bool>(), .inputs = inputs});
    const auto c = f.open(vm, image, false);
    // A new file's allocation (for 1 GiB on tmpfs, 0.2 s of kernel time) runs
    // on another core while the secret is stretched. Only for the temporary
    // file, which a failed unlock removes: --in-place must be left as it was.
    // The future's destructor waits for it on any exit.
    std::future<void> room;
    if (f.precheck) {
        const uint64_t total = table_bytes(checked_table(*c));
        if (out.kind() == Output::Kind::Temp)
            room = std::async(std::launch::async, [&out, total] { out.reserve(total); });
    }
    c->unlock(vm);
    if (room.valid()) room.get();  // its Failure (a full disk), if any
    refuse_stacked(*c, "decrypt");
    const blkcrypt::dm::DmTable table = checked_table(*c);
    copy_table({.table = table, .store = c->store, .out = out, .name = image,
                .threads = vm.count("threads") ? vm["threads"].as<unsigned>() : 0u,
                .progress = progress_settings(vm)});
    out.commit();
    return 0;
}

// The table action: with lower tables (LUKS2 --integrity), every table as
// `dmsetup table` lists several devices, "NAME: line", lowest first.
int run_table(const ContainerFormat& f, const po::variables_map& vm, const ActionArgs& a) {
    const auto c = unlocked(f, vm, one_file(f, a), false);
    auto lower = c->lower_tables();
    if (!lower) throw Failure(lower.error().message);
    if (lower->empty()) return print_table(vm, c->table());
    const blkcrypt::dm::DmTable top = checked_table(*c);
    for (const auto& t : *lower) std::cout << t.name << ": " << t.text;
    std::cout << c->mapping_name() << ": " << blkcrypt::dm::format_dm_table(top, vm["show-key"].as<bool>());
    return 0;
}

// The plaintext over NBD, read-write unless --read-only, as `cryptsetup open`
// maps it: a write lands encrypted in place.
int run_serve(const ContainerFormat& f, const po::variables_map& vm, const ActionArgs& a) {
    const auto c = unlocked(f, vm, one_file(f, a), !vm["read-only"].as<bool>());
    auto lower = c->lower_tables();
    if (!lower) throw Failure(lower.error().message);
    const blkcrypt::dm::DmTable table = checked_table(*c);
    // The lower tables as the table action prints them, then the top one:
    // the stack dmsetup loads, built by the dm layer.
    std::vector<blkcrypt::dm::NamedDmTable> stack;
    for (const auto& t : *lower) {
        auto parsed = blkcrypt::dm::parse_dm_table(t.text);
        if (!parsed) throw Failure(c->path + ": " + t.name + ": " + parsed.error().message);
        stack.push_back({t.name, std::move(parsed).value()});
    }
    stack.push_back({c->mapping_name(), table});
    block_stop_signals();  // after the KDF, before the targets' threads exist
    return serve_table(vm, stack, c->store, c->serve_how(table));
}

}  // namespace

int run_container(const ContainerFormat& f, Args args) {
    CommandLine cl{usage(f), f.summary +
                               "\nOUT follows the output policy (docs/outputs.md). IMAGE must be a regular\n"
                               "file or a block device."};
    declare_options(f, cl);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const ActionArgs a = action_arguments(*vm);
    if (!f.key_file_help.empty() && f.passphrase && vm->count("key-file") && vm->count("passphrase-file"))
        throw UsageError("--key-file and --passphrase-file exclude each other");
    if (const OwnAction* o = own_action(f, a.action)) return o->run(*vm, a.files);
    if (has_action(f, a.action)) {
        if (a.action == "dump") return run_dump(f, *vm, a);
        if (a.action == "test-passphrase") {
            (void)unlocked(f, *vm, one_file(f, a), false, true);
            return 0;
        }
        if (a.action == "decrypt") return run_decrypt(f, *vm, a);
        if (a.action == "serve") return run_serve(f, *vm, a);
        // The dm table the activation loads, keys hidden unless --show-key.
        if (a.action == "table") return run_table(f, *vm, a);
    }
    const std::vector<Action> all = actions(f);
    std::string list;
    for (std::size_t i = 0; i < all.size(); ++i)
        list += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].name;
    throw UsageError("unknown action '" + a.action + "': use " + list);
}

const ContainerFormat* find_container_format(std::string_view name) {
    for (const ContainerFormat* f : {&kBitlkFormat, &kFvault2Format, &kLoopaesFormat, &kLuksFormat, &kTcryptFormat})
        if (f->name == name) return f;
    return nullptr;
}

}  // namespace cli
