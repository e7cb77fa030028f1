/*
 * An ns-3 Application that keeps a queue pair busy: it posts messages of a fixed size on the
 * QP's streams in turn, keeping a number outstanding, until it has posted its quota. It
 * remembers when each message was posted, so that the receiver's completion gives its
 * completion time.
 */
#ifndef METAROCE_RDMA_MESSAGE_SOURCE_H
#define METAROCE_RDMA_MESSAGE_SOURCE_H

#include "model/transport/queue-pair.h"

#include "ns3/application.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <map>
#include <utility>

namespace ns3
{
namespace metaroce
{

class RdmaMessageSource : public Application
{
  public:
    static TypeId GetTypeId();

    RdmaMessageSource();
    ~RdmaMessageSource() override;

    /// The QP it posts on (the sending side of a connection).
    void SetQueuePair(Ptr<QueuePair> qp);
    Ptr<QueuePair> GetQueuePair() const { return m_qp; }

    /// When message (stream, seq) was posted, in ps, and forget it; -1 if this source did not
    /// post it (or was asked already).
    int64_t TakePostedPs(uint16_t stream, uint32_t seq);

    /// Messages posted so far.
    uint64_t GetPosted() const { return m_posted; }
    /// When each message not yet taken was posted, by (stream, seq).
    const std::map<std::pair<uint16_t, uint32_t>, int64_t>& PostedTimes() const
    {
        return m_postedAt;
    }

  private:
    void DoDispose() override;
    void StartApplication() override;
    void StopApplication() override;
    void PostOne();

    Ptr<QueuePair> m_qp;
    uint64_t m_messageBytes{0};
    uint64_t m_maxMessages{0};
    uint32_t m_outstanding{1};
    uint32_t m_streams{1};
    bool m_running{false};
    uint64_t m_posted{0};
    std::map<std::pair<uint16_t, uint32_t>, int64_t> m_postedAt;
    /// (stream, seq, bytes) of each message posted.
    TracedCallback<uint16_t, uint32_t, uint64_t> m_postTrace;
};

} // namespace metaroce
} // namespace ns3

#endif
