-- Argo CD health for prestage.dev PinnedImageSets (argocd-cm:
-- resource.customizations.health.prestage.dev_PinnedImageSet). Healthy only when the set's
-- status speaks of its current generation and says Ready: every node it selects holds and pins
-- every image. A set just created (observedGeneration 0, no conditions) is Progressing.
local hs = { status = "Progressing", message = "waiting for the prestage agents' status" }
if obj.status == nil or obj.metadata.generation == nil then
  return hs
end
if obj.status.observedGeneration == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.message = "the set's generation " .. tostring(obj.metadata.generation) .. " is not observed yet"
  return hs
end
local ready, stalled = nil, nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then ready = condition end
    if condition.type == "Stalled" then stalled = condition end
  end
end
if stalled ~= nil and stalled.status == "True" then
  return { status = "Degraded", message = stalled.message }
end
if ready ~= nil and ready.status == "True" then
  return { status = "Healthy", message = ready.message }
end
if ready ~= nil then
  hs.message = ready.message
end
return hs
