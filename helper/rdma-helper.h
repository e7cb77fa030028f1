/*
 * Puts RDMA NICs on a fabric's hosts and connects queue pairs between them.
 * The QP flavour (RoCEv2, MetaRoCE) and its attributes come from a QueuePairFactory, so the
 * same helper serves both transports and user-defined ones.
 */
#ifndef METAROCE_RDMA_HELPER_H
#define METAROCE_RDMA_HELPER_H

#include "helper/fabric-helper.h"
#include "model/core/fabric-random.h"
#include "model/transport/rdma-nic.h"

#include "ns3/object-factory.h"

#include <functional>
#include <vector>

namespace ns3
{
namespace metaroce
{

class RdmaHelper
{
  public:
    /// stream: random stream for entropies (see AssignStreams conventions of Fabric).
    RdmaHelper(Fabric& fabric, int64_t stream);
    /// Closes the NICs it installed: a NIC and its QPs reference each other (QPs, rate
    /// hints, completion handlers), so without it they would outlive the run.
    ~RdmaHelper();
    RdmaHelper(const RdmaHelper&) = delete;
    RdmaHelper& operator=(const RdmaHelper&) = delete;
    /// One NIC per host (all of them).
    void InstallNics();
    Ptr<RdmaNic> Nic(uint32_t i) const { return m_nics[i]; }
    uint32_t NumNics() const { return static_cast<uint32_t>(m_nics.size()); }

    /// Sets the QP type and attributes used by Connect (attribute values as strings).
    void SetQueuePairType(const std::string& typeName);
    QueuePairFactory& QpFactory() { return m_qpFactory; }

    /// Connects NIC a to NIC b with one QP at each end. Transports pinned to a port (RoCEv2)
    /// get plane `plane`, or the next plane in a round robin of a's connections if plane < 0,
    /// and a random entropy per direction.
    std::pair<Ptr<QueuePair>, Ptr<QueuePair>> Connect(uint32_t a, uint32_t b, int32_t plane = -1);

    /// On several processes: which NICs this process simulates. Connect then makes only
    /// their ends (the other is null), drawing entropies and reserving QPNs as for both, so
    /// every process numbers and seeds them alike.
    void SetLocalNics(std::function<bool(uint32_t nic)> isLocal) { m_isLocal = std::move(isLocal); }

  private:
    Fabric& m_fabric;
    std::vector<Ptr<RdmaNic>> m_nics;
    std::vector<uint32_t> m_nextPlane;
    QueuePairFactory m_qpFactory;
    FastRng m_rng;
    std::function<bool(uint32_t)> m_isLocal;
};

} // namespace metaroce
} // namespace ns3

#endif
