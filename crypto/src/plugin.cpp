// The plugin loader (see plugin.hpp): dlopen, ABI check, all-or-nothing
// registration with self-tests, and module lifetime.
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/plugin.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include <dlfcn.h>

namespace blkcrypt {

std::shared_ptr<Alg> bind_module(std::shared_ptr<Alg> alg, std::shared_ptr<void> module) {
    Alg* raw = alg.get();
    return std::shared_ptr<Alg>(raw, [alg = std::move(alg), module = std::move(module)](Alg*) mutable {
        alg.reset();     // runs the plugin's destructors while its code is mapped
        module.reset();  // then, if this was the last user, dlclose
    });
}

namespace {

std::shared_ptr<Template> bind_template(std::shared_ptr<Template> t, std::shared_ptr<void> module) {
    Template* raw = t.get();
    return std::shared_ptr<Template>(raw, [t = std::move(t), module = std::move(module)](Template*) mutable {
        t.reset();
        module.reset();
    });
}

struct Loaded {
    PluginInfo info;
    std::shared_ptr<void> handle;
    std::vector<std::shared_ptr<Template>> templates;
    std::vector<std::pair<std::string, std::string>> vectors;  // text, source: removed on unload
};

// What a load has added so far, taken back if the plugin is refused: its
// vectors, and every algorithm registered since the load began (the plugin's
// own, and the template instances its vectors' self-tests built, which would
// otherwise keep a failed driver name taken).
class Rollback {
public:
    explicit Rollback(Registry& reg) : reg_(reg) {
        for (const auto& s : reg.list()) before_.insert(s.info.driver);
    }
    ~Rollback() {
        if (committed_) return;
        for (const auto& [text, source] : vectors) remove_vectors(reg_, text, source);
        reg_.unregister_templates(templates);
        for (const auto& s : reg_.list())
            if (!before_.count(s.info.driver)) (void)reg_.unregister_alg(s.info.driver);
    }
    Rollback(const Rollback&) = delete;
    Rollback& operator=(const Rollback&) = delete;
    void commit() { committed_ = true; }

    std::vector<std::pair<std::string, std::string>> vectors;  // added so far
    std::vector<std::shared_ptr<Template>> templates;         // registered so far

private:
    Registry& reg_;
    std::set<std::string> before_;
    bool committed_ = false;
};

struct PluginTable {
    std::mutex mu;  // one load or unload at a time per registry
    std::vector<Loaded> plugins;  // their vectors go with the registry
};

PluginTable& table(Registry& reg) {
    static std::mutex create_mu;
    std::lock_guard lk(create_mu);
    auto& slot = reg.attachment("plugins");
    if (!slot) slot = std::make_shared<PluginTable>();
    return *static_cast<PluginTable*>(slot.get());
}

class Host final : public PluginHost {
public:
    explicit Host(Registry& reg) : reg_(reg) {}
    void add_alg(std::shared_ptr<Alg> a) override {
        if (a) algs.push_back(std::move(a));
        else fail("add_alg: null algorithm");
    }
    void add_template(std::shared_ptr<Template> t) override {
        if (t) tmpls.push_back(std::move(t));
        else fail("add_template: null template");
    }
    void add_vectors(std::string_view text, std::string_view source) override {
        vectors.emplace_back(text, source);
    }
    void fail(std::string_view why) override {
        if (error.empty()) error = why;
    }
    Registry& registry() override { return reg_; }

    std::vector<std::shared_ptr<Alg>> algs;
    std::vector<std::shared_ptr<Template>> tmpls;
    std::vector<std::pair<std::string, std::string>> vectors;
    std::string error;

private:
    Registry& reg_;
};

Error refused(const std::string& path, const std::string& why) {
    return make_error(Status::Invalid, "plugin '" + path + "' refused: " + why);
}

// The names the plugin's vectors test, which must now resolve and pass.
std::vector<std::string> vector_names(const Host& host) {
    std::vector<std::string> names;
    for (const auto& [text, source] : host.vectors) {
        auto sets = parse_vector_file(text, source);
        if (sets)
            for (const auto& s : *sets) names.push_back(s.name);
    }
    return names;
}

// Any failed self-test among what the plugin brought, as a message. The
// registry tests an algorithm on first use; a plugin's are used here, at load
// (as the kernel tests a module's algorithms when it loads), so a broken one
// refuses the plugin instead of failing later commands.
std::string first_failure(Registry& reg, const Host& host) {
    for (const auto& a : host.algs) (void)reg.lookup_any(a->info().driver);
    for (const auto& st : reg.list())
        for (const auto& a : host.algs)
            if (st.info.driver == a->info().driver && st.selftest == SelftestState::Failed)
                return "self-test of '" + st.info.driver + "' failed: " + st.selftest_message;
    for (const auto& name : vector_names(host)) {
        auto alg = reg.lookup_any(name);
        if (!alg) return "'" + name + "' does not pass its self-test: " + alg.error().message;
    }
    return {};
}

}  // namespace

Result<PluginInfo> load_plugin(Registry& reg, const std::string& path) {
    PluginTable& tab = table(reg);
    std::lock_guard lk(tab.mu);
    // RTLD_LOCAL: two plugins may use the same internal symbol names.
    void* raw = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!raw) return refused(path, ::dlerror());
    std::shared_ptr<void> handle(raw, [](void* h) { ::dlclose(h); });
    auto entry = reinterpret_cast<blkcrypt_plugin_entry_fn>(::dlsym(raw, BLKCRYPT_PLUGIN_ENTRY_SYMBOL));
    if (!entry) return refused(path, "no entry point '" BLKCRYPT_PLUGIN_ENTRY_SYMBOL "'");
    const blkcrypt_plugin* desc = entry();
    if (!desc || !desc->name || !desc->init) return refused(path, "the entry point returned no descriptor");
    if (desc->abi_version != BLKCRYPT_PLUGIN_ABI_VERSION)
        return refused(path, "built for plugin ABI " + std::to_string(desc->abi_version) +
                                 ", this blkcrypt has ABI " + std::to_string(BLKCRYPT_PLUGIN_ABI_VERSION));
    const std::string name = desc->name;
    for (const auto& p : tab.plugins)
        if (p.info.name == name) return refused(path, "a plugin named '" + name + "' is already loaded");

    Host host(reg);
    int rc = 0;
    try {
        rc = desc->init(&host);
    } catch (const std::exception& e) {
        host.fail(std::string("init threw: ") + e.what());
    } catch (...) {
        host.fail("init threw");
    }
    if (rc != 0 && host.error.empty()) host.error = "init returned " + std::to_string(rc);
    if (!host.error.empty()) return refused(path, host.error);
    Rollback undo(reg);
    for (const auto& [text, source] : host.vectors) {
        if (auto r = add_vectors(reg, text, source); !r) return refused(path, r.error().message);
        undo.vectors.emplace_back(text, source);
    }

    Loaded rec{{name, desc->description ? desc->description : "", path, {}, {}}, handle, {}};
    for (auto& t : host.tmpls) {
        t->module = path;
        t->module_handle = handle;
        rec.info.templates.emplace_back(t->name());
        rec.templates.push_back(bind_template(t, handle));
    }
    std::vector<std::shared_ptr<Alg>> algs;
    for (auto& a : host.algs) {
        a->set_module(path);
        rec.info.drivers.push_back(a->info().driver);
        algs.push_back(bind_module(a, handle));
    }
    if (auto r = reg.register_templates(rec.templates); !r) return refused(path, r.error().message);
    undo.templates = rec.templates;
    if (auto r = reg.register_algs(algs); !r) return refused(path, r.error().message);
    if (auto why = first_failure(reg, host); !why.empty()) return refused(path, why);
    undo.commit();
    rec.vectors = host.vectors;
    PluginInfo info = rec.info;
    tab.plugins.push_back(std::move(rec));
    return info;
}

std::vector<Error> load_plugin_dirs(Registry& reg, std::string_view dirs) {
    namespace fs = std::filesystem;
    std::vector<Error> errors;
    while (!dirs.empty()) {
        const auto colon = dirs.find(':');
        const std::string dir(dirs.substr(0, colon));
        dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
        if (dir.empty()) continue;
        std::error_code ec;
        std::vector<std::string> files;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".so") files.push_back(e.path().string());
        if (ec) {
            errors.push_back(make_error(Status::IoError, "plugin directory '" + dir + "': " + ec.message()));
            continue;
        }
        std::sort(files.begin(), files.end());  // a stable load order
        for (const auto& f : files)
            if (auto r = load_plugin(reg, f); !r) errors.push_back(r.error());
    }
    return errors;
}

Result<void> unload_plugin(Registry& reg, std::string_view name) {
    PluginTable& tab = table(reg);
    std::lock_guard lk(tab.mu);
    auto it = std::find_if(tab.plugins.begin(), tab.plugins.end(),
                           [&](const Loaded& p) { return p.info.name == name; });
    if (it == tab.plugins.end())
        return make_error(Status::NotFound, "no plugin named '" + std::string(name) + "' is loaded");
    // Best effort per driver: one the caller already unregistered is NotFound,
    // which is the state unloading wants.
    for (const auto& d : it->info.drivers) (void)reg.unregister_alg(d);
    reg.unregister_templates(it->templates);
    for (const auto& [text, source] : it->vectors) remove_vectors(reg, text, source);
    tab.plugins.erase(it);  // the object closes when the last transform goes
    return {};
}

std::vector<PluginInfo> loaded_plugins(Registry& reg) {
    PluginTable& tab = table(reg);
    std::lock_guard lk(tab.mu);
    std::vector<PluginInfo> out;
    for (const auto& p : tab.plugins) out.push_back(p.info);
    return out;
}

}  // namespace blkcrypt
