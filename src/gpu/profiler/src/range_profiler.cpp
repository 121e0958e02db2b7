#include "range_profiler.hpp"

#include "json_writer.hpp"

namespace kp {

std::vector<std::string> split_csv(const char* csv) {
    std::vector<std::string> out;
    if (!csv) return out;
    std::string cur;
    for (const char* p = csv;; ++p) {
        if (*p == ',' || *p == '\0') {
            size_t b = cur.find_first_not_of(" \t\n"), e = cur.find_last_not_of(" \t\n");
            if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
            cur.clear();
            if (*p == '\0') break;
        } else {
            cur += *p;
        }
    }
    return out;
}

MetricHost::~MetricHost() {
    if (host_) {
        CUpti_Profiler_Host_Deinitialize_Params p = {
            CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        p.pHostObject = host_;
        cuptiProfilerHostDeinitialize(&p);
    }
}

Status MetricHost::open(const Device& d) {
    CUpti_Profiler_Host_Initialize_Params p = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = d.chip.c_str();
    p.pCounterAvailabilityImage = d.counter_availability.data();
    KP_CUPTI(cuptiProfilerHostInitialize(&p));
    host_ = p.pHostObject;
    return Status::Ok();
}

bool MetricHost::is_valid(const std::string& metric) {
    CUpti_Profiler_Host_GetMetricProperties_Params p = {
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    p.pHostObject = host_;
    p.pMetricName = metric.c_str();
    return cuptiProfilerHostGetMetricProperties(&p) == CUPTI_SUCCESS;
}

Status MetricHost::build_config(const std::vector<std::string>& metrics,
                                std::vector<uint8_t>& config, size_t& passes) {
    std::vector<const char*> names;
    for (auto& m : metrics) names.push_back(m.c_str());
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host_;
    add.ppMetricNames = names.data();
    add.numMetrics = names.size();
    KP_CUPTI(cuptiProfilerHostConfigAddMetrics(&add));

    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host_;
    KP_CUPTI(cuptiProfilerHostGetConfigImageSize(&size));
    config.assign(size.configImageSize, 0);

    CUpti_Profiler_Host_GetConfigImage_Params img = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    img.pHostObject = host_;
    img.configImageSize = config.size();
    img.pConfigImage = config.data();
    KP_CUPTI(cuptiProfilerHostGetConfigImage(&img));

    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = config.size();
    np.pConfigImage = config.data();
    KP_CUPTI(cuptiProfilerHostGetNumOfPasses(&np));
    passes = np.numOfPasses;
    return Status::Ok();
}

namespace {
std::map<std::string, std::shared_ptr<PreparedMetrics>> g_prepared;  // key: chip, then metrics
std::map<std::string, std::unique_ptr<MetricHost>> g_validators;      // key: chip
}  // namespace

Status validate_metrics(const Device& d, const std::vector<std::string>& metrics,
                        std::vector<std::string>& ok, std::vector<std::string>& bad) {
    auto& host = g_validators[d.chip];
    if (!host) {
        auto fresh = std::make_unique<MetricHost>();
        KP_TRY(fresh->open(d));
        host = std::move(fresh);
    }
    for (auto& m : metrics) (host->is_valid(m) ? ok : bad).push_back(m);
    return Status::Ok();
}

Status prepare_metrics(const Device& d, const std::vector<std::string>& metrics,
                       std::shared_ptr<PreparedMetrics>& out) {
    std::string key = d.chip;
    for (auto& m : metrics) key += "\n" + m;
    auto found = g_prepared.find(key);
    if (found != g_prepared.end()) {
        out = found->second;
        return Status::Ok();
    }
    std::vector<std::string> ok, bad;
    KP_TRY(validate_metrics(d, metrics, ok, bad));
    if (!bad.empty())
        return Status::Fail(KP_EINVAL, "metric not available on " + d.chip + ": " + bad.front());
    auto fresh = std::make_shared<PreparedMetrics>();
    KP_TRY(fresh->host.open(d));
    KP_TRY(fresh->host.build_config(metrics, fresh->config, fresh->passes));
    g_prepared[key] = fresh;
    out = fresh;
    return Status::Ok();
}

void forget_prepared_metrics() {
    g_prepared.clear();
    g_validators.clear();
}

RangeSession::~RangeSession() { release(); }

void RangeSession::release() {
    flush_.reset();
    if (!object_) return;
    if (in_pass_) {
        CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        stop.pRangeProfilerObject = object_;
        cuptiRangeProfilerStop(&stop);
        in_pass_ = false;
    }
    CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = object_;
    cuptiRangeProfilerDisable(&p);
    object_ = nullptr;
}

Status RangeSession::begin(const Device& d, const std::vector<std::string>& metrics,
                           int max_ranges, int replay_mode) {
    if (metrics.empty()) return Status::Fail(KP_EINVAL, "kp_profile_begin: no metrics given");
    if (max_ranges <= 0 || max_ranges > 4096)
        return Status::Fail(KP_EINVAL, "kp_profile_begin: max_ranges must be 1..4096");
    if (replay_mode != KP_REPLAY_KERNEL && replay_mode != KP_REPLAY_USER &&
        replay_mode != KP_REPLAY_USER_SWEEP)
        return Status::Fail(KP_EINVAL, "kp_profile_begin: replay_mode must be KP_REPLAY_*");
    metrics_ = metrics;
    Status prepared = prepare_metrics(d, metrics_, prepared_);
    if (!prepared.ok()) return Status::Fail(prepared.code, "kp_profile_begin: " + prepared.message);

    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = d.ctx;
    KP_CUPTI(cuptiRangeProfilerEnable(&en));
    object_ = en.pRangeProfilerObject;

    std::vector<const char*> names;
    for (auto& m : metrics_) names.push_back(m.c_str());
    CUpti_RangeProfiler_GetCounterDataSize_Params sz = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sz.pRangeProfilerObject = object_;
    sz.pMetricNames = names.data();
    sz.numMetrics = names.size();
    sz.maxNumOfRanges = static_cast<size_t>(max_ranges);
    sz.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
    KP_CUPTI(cuptiRangeProfilerGetCounterDataSize(&sz));
    counter_data_.assign(sz.counterDataSize, 0);

    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ci.pRangeProfilerObject = object_;
    ci.counterDataSize = counter_data_.size();
    ci.pCounterData = counter_data_.data();
    KP_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&ci));

    CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    sc.pRangeProfilerObject = object_;
    sc.configSize = prepared_->config.size();
    sc.pConfig = prepared_->config.data();
    sc.counterDataImageSize = counter_data_.size();
    sc.pCounterDataImage = counter_data_.data();
    sc.range = CUPTI_AutoRange;
    sc.replayMode = replay_mode == KP_REPLAY_KERNEL ? CUPTI_KernelReplay : CUPTI_UserReplay;
    sc.maxRangesPerPass = static_cast<size_t>(max_ranges);
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    KP_CUPTI(cuptiRangeProfilerSetConfig(&sc));
    if (replay_mode == KP_REPLAY_USER_SWEEP) {
        flush_ = std::make_unique<LaunchFlush>();
        KP_TRY(flush_->open(d));
    }
    sequence_.clear();
    pass_count_ = 0;
    all_done_ = false;
    return Status::Ok();
}

Status RangeSession::pass_begin() {
    if (!object_ || in_pass_ || all_done_)
        return Status::Fail(KP_ESTATE, "kp_profile_pass_begin: no session, or pass already open");
    CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = object_;
    KP_CUPTI(cuptiRangeProfilerStart(&p));
    in_pass_ = true;
    // Armed after Start: CUPTI's per-pass setup leaves dirty lines the first sweep must catch.
    if (flush_) flush_->arm();
    return Status::Ok();
}

Status RangeSession::pass_end(bool& all_done) {
    if (!object_ || !in_pass_)
        return Status::Fail(KP_ESTATE, "kp_profile_pass_end: no pass is open");
    CUpti_RangeProfiler_Stop_Params p = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = object_;
    in_pass_ = false;
    if (flush_) flush_->disarm();
    KP_CUPTI(cuptiRangeProfilerStop(&p));
    all_done_ = p.isAllPassSubmitted != 0;
    all_done = all_done_;
    if (flush_) {
        KP_TRY(flush_->error());
        // Ranges are matched to launches by position, so every pass must launch alike.
        if (pass_count_ && flush_->sequence() != sequence_)
            return Status::Fail(KP_ESTATE, "kp_profile_pass_end: pass " +
                                               std::to_string(pass_count_) +
                                               " launched a different kernel sequence");
        sequence_ = flush_->sequence();
    }
    ++pass_count_;
    return Status::Ok();
}

Status RangeSession::end(std::string& json) {
    if (!object_ || in_pass_)
        return Status::Fail(KP_ESTATE, "kp_profile_end: no session, or a pass is still open");
    CUpti_RangeProfiler_DecodeData_Params dec = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    dec.pRangeProfilerObject = object_;
    KP_CUPTI(cuptiRangeProfilerDecodeData(&dec));

    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    KP_CUPTI(cuptiRangeProfilerGetCounterDataInfo(&info));

    std::vector<const char*> names;
    for (auto& m : metrics_) names.push_back(m.c_str());
    std::vector<double> values(names.size());

    if (flush_ && sequence_.size() != info.numTotalRanges)
        return Status::Fail(KP_ECUPTI, "kp_profile_end: " + std::to_string(info.numTotalRanges) +
                                           " ranges for " + std::to_string(sequence_.size()) +
                                           " launches (sweeps included); cannot drop the sweeps");
    size_t sweeps = 0;
    for (bool s : sequence_) sweeps += s ? 1 : 0;

    json = "{\"passes\":";
    json_int(json, (long long)prepared_->passes);
    json += ",\"dropped\":";
    json_int(json, (long long)dec.numOfRangeDropped);
    json += ",\"sweeps\":";
    json_int(json, (long long)sweeps);
    json += ",\"ranges\":[";
    bool first = true;
    for (size_t r = 0; r < info.numTotalRanges; ++r) {
        if (flush_ && sequence_[r]) continue;
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {
            CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        ri.pCounterDataImage = counter_data_.data();
        ri.counterDataImageSize = counter_data_.size();
        ri.rangeIndex = r;
        ri.rangeDelimiter = "/";
        KP_CUPTI(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));

        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {
            CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        ev.pHostObject = prepared_->host.object();
        ev.pCounterDataImage = counter_data_.data();
        ev.counterDataImageSize = counter_data_.size();
        ev.rangeIndex = r;
        ev.ppMetricNames = names.data();
        ev.numMetrics = names.size();
        ev.pMetricValues = values.data();
        KP_CUPTI(cuptiProfilerHostEvaluateToGpuValues(&ev));

        if (!first) json += ',';
        first = false;
        json += "{\"range\":";
        json_string(json, ri.rangeName ? ri.rangeName : std::to_string(r));
        json += ",\"metrics\":{";
        for (size_t m = 0; m < names.size(); ++m) {
            if (m) json += ',';
            json_string(json, metrics_[m]);
            json += ':';
            json_number(json, values[m]);
        }
        json += "}}";
    }
    json += "]}";
    release();  // disables the range profiler (the prepared metrics stay for the next session)
    return Status::Ok();
}

}  // namespace kp
