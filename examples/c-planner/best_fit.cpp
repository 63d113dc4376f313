/*
 * cpp-best-fit: a memplan planner written in C++ (docs/writing-a-planner-in-c.md), as a
 * vendor wraps a solver it already has.
 *
 * The solver (`BestFitSolver`) stands for existing code that knows nothing of memplan: it
 * takes blocks as (size, start, end) with half-open lifetimes [start, end) and returns an
 * offset per block. Its algorithm: blocks by decreasing size (or by decreasing size x
 * lifetime, option "order": "area"), each into the smallest gap that fits among the placed
 * blocks live at the same time (the lowest such gap on a tie), or on top of them when no gap
 * fits. O(n^2 log n) for n blocks.
 *
 * The boundary (`cpp_best_fit_pack`) is all memplan sees: a C function that
 *   - turns memplan's buffers into the solver's blocks: lifetimes from inclusive [first, last]
 *     to half-open [first, last + 1), and sizes in units of the largest alignment of the
 *     arena, so that any offset the solver returns, times that unit, honours every buffer's
 *     alignment;
 *   - refuses what the solver cannot do (fixed offsets) and options it does not know, with a
 *     message (MEMPLAN_INVALID_REQUEST, memplan exits 2);
 *   - catches every exception: none may cross into memplan (std::bad_alloc and the rest
 *     become MEMPLAN_FAILED with their what(); a stop request, MEMPLAN_CANCELLED).
 *
 * Build: c++ -std=c++17 -O2 -fPIC -shared -I PATH/TO/plugin-api/include \
 *            -o libcpp_best_fit.so best_fit.cpp
 */
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "memplan_planner.h"

namespace {

/* The existing solver's input: a block of `size` units live during [start, end). */
struct Block {
    std::uint64_t size;
    std::uint32_t start;
    std::uint32_t end;
};

/* Thrown by the solver when told to stop. */
struct Stopped : std::runtime_error {
    Stopped() : std::runtime_error("cpp-best-fit: stopped at the time limit before every block was placed") {}
};

class BestFitSolver {
public:
    enum class Order { Size, Area };

    BestFitSolver(Order order, std::function<bool()> should_stop)
        : order_(order), should_stop_(std::move(should_stop)) {}

    std::vector<std::uint64_t> solve(const std::vector<Block> &blocks) const {
        std::vector<std::size_t> order(blocks.size());
        for (std::size_t i = 0; i < order.size(); ++i) {
            order[i] = i;
        }
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return weight(blocks[a]) > weight(blocks[b]);
        });
        std::vector<std::uint64_t> offsets(blocks.size(), 0);
        std::vector<bool> placed(blocks.size(), false);
        std::vector<std::pair<std::uint64_t, std::uint64_t>> busy; /* [offset, end) */
        for (std::size_t step = 0; step < order.size(); ++step) {
            if (step % 256 == 0 && should_stop_()) {
                throw Stopped();
            }
            const Block &block = blocks[order[step]];
            busy.clear();
            for (std::size_t other = 0; other < blocks.size(); ++other) {
                if (placed[other] && blocks[other].start < block.end &&
                    block.start < blocks[other].end) {
                    busy.emplace_back(offsets[other], offsets[other] + blocks[other].size);
                }
            }
            std::sort(busy.begin(), busy.end());
            offsets[order[step]] = smallest_gap(busy, block.size);
            placed[order[step]] = true;
        }
        return offsets;
    }

private:
    std::uint64_t weight(const Block &block) const {
        return order_ == Order::Size ? block.size : block.size * (block.end - block.start);
    }

    /* The start of the smallest gap between `busy` intervals (sorted) that holds `size`, or
     * the top of them all. */
    static std::uint64_t smallest_gap(const std::vector<std::pair<std::uint64_t, std::uint64_t>> &busy,
                                      std::uint64_t size) {
        std::uint64_t top = 0, best = 0, best_gap = UINT64_MAX;
        for (const auto &interval : busy) {
            if (interval.first >= top && interval.first - top >= size &&
                interval.first - top < best_gap) {
                best = top;
                best_gap = interval.first - top;
            }
            top = std::max(top, interval.second);
        }
        return best_gap == UINT64_MAX ? top : best;
    }

    Order order_;
    std::function<bool()> should_stop_;
};

/* The "order" option of the JSON options object: "size" (the default) or "area". A real
 * planner would use a JSON library; this example only looks for that one key. */
BestFitSolver::Order order_option(const char *options_json) {
    const std::string options(options_json);
    const std::string key = "\"order\"";
    const std::size_t at = options.find(key);
    if (at == std::string::npos) {
        return BestFitSolver::Order::Size;
    }
    const std::size_t open = options.find('"', options.find(':', at + key.size()));
    const std::size_t close = open == std::string::npos ? open : options.find('"', open + 1);
    const std::string value =
        close == std::string::npos ? std::string() : options.substr(open + 1, close - open - 1);
    if (value == "size") {
        return BestFitSolver::Order::Size;
    }
    if (value == "area") {
        return BestFitSolver::Order::Area;
    }
    throw std::invalid_argument("cpp-best-fit: option \"order\" must be \"size\" or \"area\", not \"" +
                                value + "\"");
}

} // namespace

MEMPLAN_PACKER(cpp_best_fit_pack) {
    try {
        const std::uint64_t count = request->buffer_count;
        std::uint64_t unit = 1;
        for (std::uint64_t i = 0; i < count; ++i) {
            const memplan_buffer &buffer = request->buffers[i];
            if (buffer.fixed_offset != MEMPLAN_NO_FIXED_OFFSET) {
                throw std::invalid_argument(
                    "cpp-best-fit does not place buffers at fixed offsets (buffer " +
                    std::to_string(i) + " is fixed at " + std::to_string(buffer.fixed_offset) +
                    "); use a planner that does, e.g. c-first-fit");
            }
            unit = std::max(unit, buffer.alignment);
        }
        std::vector<Block> blocks;
        blocks.reserve(count);
        for (std::uint64_t i = 0; i < count; ++i) {
            const memplan_buffer &buffer = request->buffers[i];
            blocks.push_back(Block{(buffer.size + unit - 1) / unit, buffer.first, buffer.last + 1});
        }
        const BestFitSolver solver(order_option(request->options_json),
                                   [request] { return memplan_should_stop(request); });
        const std::vector<std::uint64_t> offsets = solver.solve(blocks);
        for (std::uint64_t i = 0; i < count; ++i) {
            request->host->log(request->host->state, MEMPLAN_LOG_TRACE,
                               ("cpp-best-fit: buffer " + std::to_string(i) + " at " +
                                std::to_string(offsets[i] * unit))
                                   .c_str());
            result->offsets[i] = offsets[i] * unit;
        }
        result->offset_count = count;
        memplan_set_note(request, ("best fit by decreasing size in units of " +
                                   std::to_string(unit) + " bytes (C++)")
                                      .c_str());
        return MEMPLAN_OK;
    } catch (const std::invalid_argument &error) {
        return memplan_fail(request, MEMPLAN_INVALID_REQUEST, error.what());
    } catch (const Stopped &error) {
        return memplan_fail(request, MEMPLAN_CANCELLED, error.what());
    } catch (const std::bad_alloc &) {
        return memplan_fail(request, MEMPLAN_FAILED, "cpp-best-fit: out of memory");
    } catch (const std::exception &error) {
        return memplan_fail(request, MEMPLAN_FAILED, error.what());
    } catch (...) {
        return memplan_fail(request, MEMPLAN_FAILED, "cpp-best-fit: an unknown exception");
    }
}

MEMPLAN_MANIFEST(MEMPLAN_PLANNER("cpp-best-fit", "1.0.0",
                                 "best fit by decreasing size, a C++ solver behind the C interface",
                                 cpp_best_fit_pack));
