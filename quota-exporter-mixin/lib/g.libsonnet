// A small grafonnet-shaped library: only what these dashboards use, with grafonnet's names
// (dashboard.new, panel.timeSeries.new, standardOptions.withUnit, queryOptions.withTargets, ...),
// so the dashboards can move to grafonnet unchanged when it becomes available here.
local datasourceRef = { type: 'prometheus', uid: '${datasource}' };

// Options every panel type shares.
local common = {
  panelOptions: {
    withDescription(value): { description: value },
    // x and y come from util.grid.makeGrid.
    withGridPos(h=8, w=12, x=0, y=0): { gridPos: { h: h, w: w, x: x, y: y } },
  },
  queryOptions: {
    withTargets(value): { targets: value },
    withTransformations(value): { transformations: value },
  },
  standardOptions: {
    withUnit(value): { fieldConfig+: { defaults+: { unit: value } } },
    withOverrides(value): { fieldConfig+: { overrides: value } },
    // Data links: per series or table row, in fieldConfig.defaults.
    withLinks(value): { fieldConfig+: { defaults+: { links: value } } },
    link: {
      withTitle(value): { title: value },
      withUrl(value): { url: value },
    },
    override: {
      byName: {
        new(name): { matcher: { id: 'byName', options: name }, properties: [] },
        withProperty(id, value): { properties+: [{ id: id, value: value }] },
      },
      byRegexp: {
        new(regexp): { matcher: { id: 'byRegexp', options: regexp }, properties: [] },
        withProperty(id, value): { properties+: [{ id: id, value: value }] },
      },
    },
  },
};

local base(type, title) = {
  type: type,
  title: title,
  datasource: datasourceRef,
  fieldConfig: { defaults: {}, overrides: [] },
  options: {},
};

{
  dashboard: {
    new(title): {
      title: title,
      editable: false,
      graphTooltip: 1,  // shared crosshair
      schemaVersion: 39,
      time: { from: 'now-6h', to: 'now' },
      timepicker: {},
      timezone: 'utc',
      refresh: '30s',
      tags: [],
      links: [],
      panels: [],
      templating: { list: [] },
      annotations: { list: [] },
    },
    withUid(value): { uid: value },
    withDescription(value): { description: value },
    withTags(value): { tags: value },
    withTimezone(value): { timezone: value },
    withRefresh(value): { refresh: value },
    time: { withFrom(value): { time+: { from: value } } },
    withVariables(value): { templating: { list: value } },
    withPanels(value): { panels: value },
    withAnnotations(value): { annotations: { list: value } },
    withLinks(value): { links: value },
    link: {
      link: {
        new(title, url): {
          title: title,
          type: 'link',
          url: url,
          tags: [],
          asDropdown: false,
          includeVars: false,
          keepTime: false,
          icon: 'dashboard',
          targetBlank: false,
          tooltip: '',
        },
        options: {
          withIncludeVars(value=true): { includeVars: value },
          withKeepTime(value=true): { keepTime: value },
        },
      },
    },
    variable: {
      datasource: {
        new(name, type): {
          type: 'datasource',
          name: name,
          label: 'Data source',
          query: type,
          current: { selected: false, text: 'default', value: 'default' },
          hide: 0,
          refresh: 1,
          regex: '',
        },
      },
      query: {
        // A Prometheus label_values() variable that follows the datasource variable.
        new(name, query): {
          type: 'query',
          name: name,
          label: name,
          datasource: datasourceRef,
          query: query,
          definition: query,
          refresh: 2,  // on time range change
          sort: 1,
          hide: 0,
          regex: '',
          current: { selected: false, text: '', value: '' },
          options: [],
        },
        withLabel(value): { label: value },
        selectionOptions: {
          withMulti(value=true): { multi: value },
          withIncludeAll(value=true, customAllValue='.+'): {
            includeAll: value,
            allValue: customAllValue,
            current: { selected: true, text: ['All'], value: ['$__all'] },
          },
        },
      },
    },
    annotation: {
      // A Prometheus annotation: a region wherever expr returns a series.
      new(name, expr, iconColor): {
        name: name,
        datasource: datasourceRef,
        enable: true,
        hide: false,
        iconColor: iconColor,
        target: { expr: expr, refId: 'Anno', interval: '1m' },
      },
    },
  },

  panel: {
    timeSeries: common {
      new(title): base('timeseries', title) + {
        options: {
          legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['lastNotNull', 'max'] },
          tooltip: { mode: 'multi', sort: 'desc' },
        },
        fieldConfig+: { defaults+: { custom: { fillOpacity: 10, lineWidth: 1, showPoints: 'never', spanNulls: false } } },
      },
      fieldConfig: {
        defaults: {
          custom: {
            withDrawStyle(value): { fieldConfig+: { defaults+: { custom+: { drawStyle: value } } } },
            withStacking(mode): { fieldConfig+: { defaults+: { custom+: { stacking: { mode: mode, group: 'A' } } } } },
          },
        },
      },
    },
    stat: common {
      new(title): base('stat', title) + {
        options: {
          graphMode: 'area',
          colorMode: 'value',
          justifyMode: 'auto',
          textMode: 'auto',
          wideLayout: true,
          showPercentChange: false,
          percentChangeColorMode: 'standard',
          orientation: 'auto',
          reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
        },
      },
    },
    table: common {
      new(title): base('table', title) + {
        options: {
          frameIndex: 0,
          showHeader: true,
          cellHeight: 'sm',
          footer: { show: false, reducer: ['sum'], countRows: false, fields: '' },
        },
      },
      options: {
        withSortBy(displayName, desc=true): { options+: { sortBy: [{ displayName: displayName, desc: desc }] } },
      },
      transformation: {
        new(id, options={}): { id: id, options: options },
      },
    },
    heatmap: common {
      new(title): base('heatmap', title) + {
        options: {
          calculate: false,
          cellGap: 1,
          color: { mode: 'scheme', scheme: 'Oranges', fill: 'dark-orange', scale: 'exponential', exponent: 0.5, steps: 64, reverse: false },
          exemplars: { color: 'rgba(255,0,255,0.7)' },
          filterValues: { le: 1e-9 },
          legend: { show: true },
          rowsFrame: { layout: 'auto' },
          showValue: 'never',
          tooltip: { mode: 'single', yHistogram: true, showColorScale: false },
          yAxis: { axisPlacement: 'left', reverse: false },
        },
      },
      options: {
        yAxis: { withUnit(value): { options+: { yAxis+: { unit: value } } } },
        cellValues: { withUnit(value): { options+: { cellValues: { unit: value } } } },
      },
    },
    row: {
      new(title): { type: 'row', title: title, collapsed: false, panels: [] },
    },
  },

  query: {
    prometheus: {
      new(datasource, expr): { datasource: { type: 'prometheus', uid: datasource }, expr: expr, refId: 'A' },
      withLegendFormat(value): { legendFormat: value },
      withInstant(value=true): { instant: value, range: !value },
      withFormat(value): { format: value },
      withRefId(value): { refId: value },
    },
  },

  util: {
    grid: {
      // Lays panels out left to right, wrapping at 24 columns; a row starts a new line.
      // Each panel may carry gridPos.w / gridPos.h; the defaults are panelWidth x panelHeight.
      makeGrid(panels, panelWidth=12, panelHeight=8)::
        local step(acc, p) =
          if p.type == 'row' then
            local y = acc.y + acc.rowH;
            acc { y: y + 1, x: 0, rowH: 0, out+: [p { gridPos: { h: 1, w: 24, x: 0, y: y } }] }
          else
            local w = std.get(std.get(p, 'gridPos', {}), 'w', panelWidth);
            local h = std.get(std.get(p, 'gridPos', {}), 'h', panelHeight);
            local wrap = acc.x + w > 24;
            local x = if wrap then 0 else acc.x;
            local y = if wrap then acc.y + acc.rowH else acc.y;
            local rowH = if wrap then h else std.max(acc.rowH, h);
            acc { x: x + w, y: y, rowH: rowH, out+: [p { gridPos: { h: h, w: w, x: x, y: y } }] };
        local laid = std.foldl(step, panels, { x: 0, y: 0, rowH: 0, out: [] }).out;
        // Stable panel ids in layout order.
        [laid[i] { id: i + 1 } for i in std.range(0, std.length(laid) - 1)],
    },
  },
}
